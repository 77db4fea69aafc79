/* decode.c PACKAGE LAYER BATCH PROMPT STEPS DIR: a package's prefill and
 * decode steps from this program's own CUDA buffers, on its own stream.
 * Step k reads DIR/x{k}.bf16 (the batch's tokens packed, [tokens, hidden]
 * bf16) and writes DIR/y{k}.c.bf16. Build: cc decode.c $(pkg-config
 * --cflags --libs v4a-runtime) -lcudart. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <v4a/v4a.h>

static void check(v4a_status status) {
  if (status != V4A_OK)
    fprintf(stderr, "v4a: %s\n", v4a_last_error()), exit(1);
}

static int file(const char *dir, int k, const char *kind, void *data,
                size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s%d%s.bf16", dir, kind, k,
           kind[0] == 'y' ? ".c" : "");
  FILE *f = fopen(path, kind[0] == 'y' ? "wb" : "rb");
  size_t done = !f               ? 0
                : kind[0] == 'y' ? fwrite(data, 1, bytes, f)
                                 : fread(data, 1, bytes, f);
  return f && !fclose(f) && done == bytes;
}

int main(int argc, char **argv) {
  if (argc != 7)
    return fprintf(stderr, "usage: decode PACKAGE LAYER BATCH PROMPT STEPS "
                           "DIR\n"),
           2;
  int64_t layer = atoll(argv[2]), batch = atoll(argv[3]);
  int64_t prompt = atoll(argv[4]), steps = atoll(argv[5]);
  int64_t sequences[4096], lengths[4096];
  v4a_options options;
  v4a_options_init(&options);
  options.max_sequences = batch;
  options.layers = &layer;
  options.num_layers = 1;
  v4a_model *model;
  check(v4a_check_abi(V4A_ABI_VERSION));
  check(v4a_open_package(argv[1], &options, &model));
  check(v4a_load_random_weights(model, 1));
  v4a_info info = {0};
  info.struct_size = sizeof info;
  check(v4a_get_info(model, &info));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  for (int64_t b = 0; b < batch; ++b)
    check(v4a_add_sequence(model, &sequences[b]));
  for (int64_t k = 0; k <= steps; ++k) {
    int64_t length = k ? 1 : prompt, tokens = batch * length;
    size_t bytes = (size_t)(tokens * info.hidden_size * 2);
    void *host = malloc(bytes), *x, *y;
    cudaMalloc(&x, bytes);
    cudaMalloc(&y, bytes);
    if (!file(argv[6], (int)k, "x", host, bytes))
      return fprintf(stderr, "cannot read step %d\n", (int)k), 1;
    for (int64_t b = 0; b < batch; ++b)
      lengths[b] = length;
    cudaMemcpyAsync(x, host, bytes, cudaMemcpyHostToDevice, stream);
    v4a_tensor in = {x, V4A_BF16, V4A_CUDA, 0, tokens, info.hidden_size};
    v4a_tensor out = in;
    out.data = y;
    check(v4a_step(model, (int32_t)batch, sequences, lengths, &in, &out, 1,
                   stream));
    cudaMemcpyAsync(host, y, bytes, cudaMemcpyDeviceToHost, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess ||
        !file(argv[6], (int)k, "y", host, bytes))
      return fprintf(stderr, "step %d failed\n", (int)k), 1;
    cudaFree(x), cudaFree(y), free(host);
  }
  check(v4a_synchronize(model));
  v4a_free(model);
  printf("decode.c: %d steps of %d sequences\n", (int)steps + 1, (int)batch);
  return 0;
}
