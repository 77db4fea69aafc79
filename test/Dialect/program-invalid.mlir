// RUN: v4a-opt %s -split-input-file -verify-diagnostics

func.func @meta() {
  return
}
func.func @step() attributes {v4a.meta = @meta} {
  return
}
v4a.program @main {
  // expected-error @+1 {{'v4a.run_step' op runs @step before its metadata @meta is computed in this program}}
  v4a.run_step @step layer 0 kernels []
  v4a.run_meta @meta
}

// -----

v4a.program @main {
  // expected-error @+1 {{'v4a.run_meta' op names @missing, which is not a symbol}}
  v4a.run_meta @missing
}

// -----

v4a.program @main {
  // expected-error @+1 {{'v4a.run_step' op names @missing, which is not a symbol}}
  v4a.run_step @missing layer 0 kernels ["linear"]
}

// -----

func.func @step() {
  return
}
// expected-error @+1 {{'v4a.run_step' op expects parent op 'v4a.program'}}
v4a.run_step @step layer 0 kernels []
