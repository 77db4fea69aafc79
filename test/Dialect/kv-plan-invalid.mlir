// RUN: v4a-opt %s -split-input-file -verify-diagnostics

// A plan's buffers are #v4a.buffer attributes; anything else is refused when
// it is parsed, not cast blindly by the passes that read the plan.
// expected-error @+1 {{kv_plan buffers must all be #v4a.buffer attributes}}
module attributes {v4a.plan = #v4a.kv_plan<context_tokens = 64, page_size = 64, alignment = 256, bytes = 0, buffers = [1 : i64]>} {
}

// -----

// expected-error @+1 {{expected 'page_size'}}
module attributes {v4a.plan = #v4a.kv_plan<context_tokens = 64, bytes = 0, buffers = []>} {
}
