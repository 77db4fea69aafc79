/*===- capi-test.c - the C ABI from plain C ----------------------------===*
 *
 * capi-test CONFIG.json INPUTS.safetensors OUTPUTS.safetensors
 *
 * Compiles CONFIG for the CPU through libv4a.so, loads random weights (seed
 * 1, as v4a-run --random-weights 1) and runs a varlen batch of three
 * sequences (a prefill of 7 and 5 tokens beside an idle row, then decode
 * steps) from its own f32 and bf16 buffers; writes the inputs and outputs in
 * v4a-run's contract (x.step{k}, lengths.step{k}, y.step{k}.layer{l}) so
 * that v4a-run can rerun them. Every misuse the ABI reports is checked on
 * the way. Built with -Wall -Wextra -Werror -pedantic against v4a.h alone.
 *
 *===----------------------------------------------------------------------===*/

/* setenv and unsetenv. */
#define _POSIX_C_SOURCE 200112L

#include "v4a/v4a.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBatch = 3, kSteps = 4, kMaxLayers = 16 };
static const int64_t kLengths[kSteps][kBatch] = {
    {7, 5, 0}, {1, 1, 3}, {1, 0, 1}, {1, 1, 1}};

static int failures = 0;

/* Expects `status` from a call, and a message holding `text` on failure. */
static void expect(const char *what, v4a_status got, v4a_status want,
                   const char *text) {
  const char *message = v4a_last_error();
  if (got != want || (want != V4A_OK && !strstr(message, text))) {
    fprintf(stderr, "FAIL: %s: %s (%s), expected %s with '%s'\n", what,
            v4a_status_name(got), message, v4a_status_name(want), text);
    ++failures;
  } else if (want != V4A_OK) {
    printf("ok: %s: %s: %s\n", what, v4a_status_name(got), message);
  }
}

static char *readText(const char *path) {
  FILE *file = fopen(path, "rb");
  long size;
  char *text;
  if (!file || fseek(file, 0, SEEK_END) || (size = ftell(file)) < 0 ||
      fseek(file, 0, SEEK_SET))
    return NULL;
  text = calloc((size_t)size + 1, 1);
  if (text && fread(text, 1, (size_t)size, file) != (size_t)size) {
    free(text);
    text = NULL;
  }
  fclose(file);
  return text;
}

/* A safetensors file of f32 [B, S, dim] tensors and i32 [B] lengths. */
typedef struct Tensor {
  char name[48];
  int is_lengths;
  int64_t shape[3];
  void *data;
} Tensor;

static int64_t tensorBytes(const Tensor *t) {
  return t->is_lengths ? 4 * t->shape[0]
                       : 4 * t->shape[0] * t->shape[1] * t->shape[2];
}

static int writeSafetensors(const char *path, const Tensor *tensors, int n) {
  char header[8192];
  size_t used = 0;
  int64_t offset = 0, length;
  unsigned char size[8];
  int i;
  FILE *file;
  used += (size_t)snprintf(header + used, sizeof header - used, "{");
  for (i = 0; i < n; ++i) {
    const Tensor *t = &tensors[i];
    if (t->is_lengths)
      used += (size_t)snprintf(header + used, sizeof header - used,
                               "%s\"%s\":{\"dtype\":\"I32\",\"shape\":[%lld],",
                               i ? "," : "", t->name, (long long)t->shape[0]);
    else
      used += (size_t)snprintf(
          header + used, sizeof header - used,
          "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld,%lld],",
          i ? "," : "", t->name, (long long)t->shape[0], (long long)t->shape[1],
          (long long)t->shape[2]);
    used += (size_t)snprintf(header + used, sizeof header - used,
                             "\"data_offsets\":[%lld,%lld]}", (long long)offset,
                             (long long)(offset + tensorBytes(t)));
    offset += tensorBytes(t);
  }
  used += (size_t)snprintf(header + used, sizeof header - used, "}");
  if (used >= sizeof header || !(file = fopen(path, "wb")))
    return 0;
  length = (int64_t)used;
  for (i = 0; i < 8; ++i)
    size[i] = (unsigned char)(length >> (8 * i));
  fwrite(size, 1, 8, file);
  fwrite(header, 1, used, file);
  for (i = 0; i < n; ++i)
    fwrite(tensors[i].data, 1, (size_t)tensorBytes(&tensors[i]), file);
  return fclose(file) == 0;
}

/* bf16 bits of a float that bf16 holds exactly. */
static uint16_t bf16Of(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return (uint16_t)(bits >> 16);
}

static void checkMisuseWithoutModel(const char *json) {
  v4a_model *model = NULL;
  v4a_options options;
  v4a_options_init(&options);
  expect("header ABI", v4a_check_abi(V4A_ABI_VERSION), V4A_OK, "");
  expect("another ABI", v4a_check_abi(V4A_ABI_VERSION + 1),
         V4A_ERROR_ABI_MISMATCH, "implements ABI");
  expect("null configuration", v4a_compile(NULL, NULL, &model),
         V4A_ERROR_INVALID_ARGUMENT, "null configuration");
  expect("invalid JSON", v4a_compile("{", NULL, &model), V4A_ERROR_FAILED,
         "JSON");
  options.struct_size = 8;
  expect("options of another size", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "struct_size is 8");
  v4a_options_init(&options);
  options.backend = "tpu";
  expect("unknown backend", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "backend is 'tpu'");
  v4a_options_init(&options);
  options.max_sequences = 0;
  expect("no sequence slots", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "max_sequences is 0");
  /* A caller built for ABI 1: its options end before kv_layout. */
  v4a_options_init(&options);
  options.struct_size = (uint32_t)offsetof(v4a_options, kv_layout);
  expect("ABI 1's options", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "struct_size is 56");
  v4a_options_init(&options);
  options.kv_layout = "fp4";
  expect("unknown kv layout", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "kv_layout is 'fp4' (bf16 or fp8)");
  v4a_options_init(&options);
  options.index_layout = "int8";
  expect("unknown index layout", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "index_layout is 'int8'");
  v4a_options_init(&options);
  options.tensor_parallel = 2;
  options.tensor_rank = 2;
  expect("a rank past the degree", v4a_compile(json, &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "tensor_rank is 2, outside [0, 1]");
  v4a_options_init(&options);
  options.tensor_parallel = 3;
  expect("heads the degree does not divide",
         v4a_compile(json, &options, &model), V4A_ERROR_FAILED,
         "not divisible by the tensor-parallel degree 3");
  v4a_options_init(&options);
  options.tensor_parallel = 2;
  options.backend = "cuda";
  expect("tensor parallelism on the GPU", v4a_compile(json, &options, &model),
         V4A_ERROR_UNSUPPORTED, "runs on the cpu backend");
  v4a_options_init(&options);
  options.index_layout = "mxfp4";
  expect("a layout for a package",
         v4a_open_package("/nonexistent.v4apkg", &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "index_layout is v4a_compile's");
  v4a_options_init(&options);
  options.context_tokens = 65536;
  expect("a context for a package",
         v4a_open_package("/nonexistent.v4apkg", &options, &model),
         V4A_ERROR_INVALID_ARGUMENT, "context_tokens is v4a_compile's");
  expect("missing package",
         v4a_open_package("/nonexistent.v4apkg", NULL, &model),
         V4A_ERROR_FAILED, "nonexistent.v4apkg");
  expect("null model", v4a_load_random_weights(NULL, 1),
         V4A_ERROR_INVALID_ARGUMENT, "handle is null");
  if (model)
    fprintf(stderr, "FAIL: a failed open left a model\n"), ++failures;
}

int main(int argc, char **argv) {
  v4a_model *model = NULL;
  v4a_options options;
  v4a_info info;
  char *json;
  int64_t sequences[kBatch], layers[kMaxLayers], dim, position;
  int32_t numLayers = 0, k, b, l;
  Tensor files[2][kSteps * (kMaxLayers + 2)];
  int counts[2] = {0, 0};
  if (argc != 4 || !(json = readText(argv[1]))) {
    fprintf(stderr, "usage: capi-test CONFIG.json INPUTS OUTPUTS\n");
    return 2;
  }
  memset(files, 0, sizeof files);
  printf("%s, ABI %d\n", v4a_version(), (int)v4a_abi_version());
  checkMisuseWithoutModel(json);

  v4a_options_init(&options);
  options.max_sequences = kBatch;
  expect("compile", v4a_compile(json, &options, &model), V4A_OK, "");
  if (!model)
    return 1;
  expect("a step before weights",
         v4a_step(model, 0, NULL, NULL, NULL, NULL, 0, NULL),
         V4A_ERROR_INVALID_STATE, "no weights are loaded");
  expect("weights", v4a_load_random_weights(model, 1), V4A_OK, "");
  expect("weights again", v4a_load_random_weights(model, 1),
         V4A_ERROR_INVALID_STATE, "loaded already");
  {
    uint8_t id[128] = {0};
    expect("ranks of a cpu model", v4a_join_ranks(model, id),
           V4A_ERROR_UNSUPPORTED, "needs a GPU model");
    expect("a null communicator id", v4a_join_ranks(model, NULL),
           V4A_ERROR_INVALID_ARGUMENT, "null id");
    setenv("V4A_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    expect("no NCCL", v4a_make_communicator_id(id), V4A_ERROR_FAILED,
           "no NCCL: cannot load /nonexistent/libnccl.so.2");
    unsetenv("V4A_NCCL_LIBRARY");
  }
  info.struct_size = sizeof info;
  expect("info", v4a_get_info(model, &info), V4A_OK, "");
  expect("layers", v4a_selected_layers(model, layers, kMaxLayers, &numLayers),
         V4A_OK, "");
  dim = info.hidden_size;
  if (info.tensor_parallel != 1 || info.tensor_rank != 0)
    fprintf(stderr, "FAIL: a whole model says tensor parallel %d, rank %d\n",
            (int)info.tensor_parallel, (int)info.tensor_rank),
        ++failures;
  printf("%s model: %d layers, hidden %lld, %lld slots, %lld cache bytes, "
         "%lld weight bytes\n",
         info.backend, (int)numLayers, (long long)dim,
         (long long)info.max_sequences, (long long)info.cache_bytes,
         (long long)info.weight_bytes);
  for (b = 0; b < kBatch; ++b)
    expect("add a sequence", v4a_add_sequence(model, &sequences[b]), V4A_OK,
           "");
  expect("no free slot", v4a_add_sequence(model, &position),
         V4A_ERROR_INVALID_STATE, "slot");

  for (k = 0; k < kSteps; ++k) {
    int64_t padded = 0, tokens = 0, row = 0, t, e;
    v4a_tensor inputs[kMaxLayers], outputs[kMaxLayers];
    Tensor *x = &files[0][counts[0]++], *lengths = &files[0][counts[0]++];
    for (b = 0; b < kBatch; ++b) {
      tokens += kLengths[k][b];
      padded = kLengths[k][b] > padded ? kLengths[k][b] : padded;
    }
    snprintf(x->name, sizeof x->name, "x.step%d", (int)k);
    snprintf(lengths->name, sizeof lengths->name, "lengths.step%d", (int)k);
    x->shape[0] = kBatch, x->shape[1] = padded, x->shape[2] = dim;
    lengths->is_lengths = 1, lengths->shape[0] = kBatch;
    x->data = calloc((size_t)(kBatch * padded * dim), 4);
    lengths->data = calloc(kBatch, 4);
    /* One input for every layer: f32 for even layers, bf16 for odd ones
     * (values bf16 holds, so both are the same input). */
    float *packed = calloc((size_t)(tokens * dim + 1), 4);
    uint16_t *bits = calloc((size_t)(tokens * dim + 1), 2);
    for (b = 0; b < kBatch; ++b) {
      ((int32_t *)lengths->data)[b] = (int32_t)kLengths[k][b];
      for (t = 0; t < kLengths[k][b]; ++t, ++row)
        for (e = 0; e < dim; ++e) {
          float v = (float)((rand() % 513) - 256) / 128.0f;
          ((float *)x->data)[(b * padded + t) * dim + e] = v;
          packed[row * dim + e] = v;
          bits[row * dim + e] = bf16Of(v);
        }
    }
    for (l = 0; l < numLayers; ++l) {
      Tensor *y = &files[1][counts[1]++];
      snprintf(y->name, sizeof y->name, "y.step%d.layer%lld", (int)k,
               (long long)layers[l]);
      y->shape[0] = kBatch, y->shape[1] = padded, y->shape[2] = dim;
      y->data = calloc((size_t)(tokens * dim + 1), 4);
      inputs[l].data = l % 2 ? (void *)bits : (void *)packed;
      inputs[l].dtype = l % 2 ? V4A_BF16 : V4A_F32;
      inputs[l].memory = V4A_HOST;
      inputs[l].device = 0;
      inputs[l].rows = tokens;
      inputs[l].cols = dim;
      outputs[l] = inputs[l];
      outputs[l].data = y->data;
      outputs[l].dtype = V4A_F32;
    }
    if (k == 1) {
      outputs[0].cols = dim + 1;
      expect("a wrong shape",
             v4a_step(model, kBatch, sequences, kLengths[k], inputs, outputs,
                      numLayers, NULL),
             V4A_ERROR_INVALID_ARGUMENT, "the step needs");
      outputs[0].cols = dim;
      outputs[0].memory = V4A_CUDA;
      expect("device memory on the CPU",
             v4a_step(model, kBatch, sequences, kLengths[k], inputs, outputs,
                      numLayers, NULL),
             V4A_ERROR_INVALID_ARGUMENT, "f32 or bf16 host memory");
      outputs[0].memory = V4A_HOST;
      expect("a stream on the CPU",
             v4a_step(model, kBatch, sequences, kLengths[k], inputs, outputs,
                      numLayers, (void *)1),
             V4A_ERROR_INVALID_ARGUMENT, "null stream");
      expect("too few tensors",
             v4a_step(model, kBatch, sequences, kLengths[k], inputs, outputs,
                      numLayers - 1, NULL),
             V4A_ERROR_INVALID_ARGUMENT, "per selected layer");
      int64_t unknown[kBatch] = {0, 1, 99};
      memcpy(unknown, sequences, 2 * sizeof *unknown);
      expect("an unknown sequence",
             v4a_step(model, kBatch, unknown, kLengths[k], inputs, outputs,
                      numLayers, NULL),
             V4A_ERROR_INVALID_ARGUMENT, "unknown or finished sequence");
    }
    expect("step",
           v4a_step(model, kBatch, sequences, kLengths[k], inputs, outputs,
                    numLayers, NULL),
           V4A_OK, "");
    /* Unpack into v4a-run's padded layout. */
    for (l = 0; l < numLayers; ++l) {
      Tensor *y = &files[1][counts[1] - numLayers + l];
      float *padded_y = calloc((size_t)(kBatch * padded * dim + 1), 4);
      for (b = 0, row = 0; b < kBatch; ++b)
        for (t = 0; t < kLengths[k][b]; ++t, ++row)
          memcpy(&padded_y[(b * padded + t) * dim],
                 &((float *)y->data)[row * dim], (size_t)dim * 4);
      free(y->data);
      y->data = padded_y;
    }
    free(packed);
    free(bits);
  }
  expect("position", v4a_position(model, sequences[0], &position), V4A_OK, "");
  if (position != 10)
    fprintf(stderr, "FAIL: position %lld, expected 10\n", (long long)position),
        ++failures;
  expect("release", v4a_release_sequence(model, sequences[1]), V4A_OK, "");
  expect("a released sequence", v4a_position(model, sequences[1], &position),
         V4A_ERROR_INVALID_ARGUMENT, "unknown or released sequence");
  expect("reuse the slot", v4a_add_sequence(model, &sequences[1]), V4A_OK, "");
  expect("its position", v4a_position(model, sequences[1], &position), V4A_OK,
         "");
  if (position != 0)
    fprintf(stderr, "FAIL: a reused slot at %lld\n", (long long)position),
        ++failures;
  expect("a cache component", v4a_cache_size(model, layers[0], "kv", &position),
         V4A_ERROR_INVALID_ARGUMENT, "unknown cache component 'kv'");
  if (strcmp(v4a_error(model), v4a_last_error()))
    fprintf(stderr, "FAIL: the model's error differs from the thread's\n"),
        ++failures;
  v4a_free(model);
  if (!writeSafetensors(argv[2], files[0], counts[0]) ||
      !writeSafetensors(argv[3], files[1], counts[1])) {
    fprintf(stderr, "FAIL: cannot write the tensors\n");
    return 1;
  }
  for (k = 0; k < 2; ++k)
    for (b = 0; b < counts[k]; ++b)
      free(files[k][b].data);
  free(json);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
