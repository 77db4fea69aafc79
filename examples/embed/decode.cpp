// decode.cpp PACKAGE LAYER BATCH PROMPT STEPS DIR: decode.c in C++, built
// with CMake against an installed v4a (find_package(v4a), v4a::runtime);
// writes DIR/y{k}.cpp.bf16.
#include <cuda_runtime.h>
#include <v4a/v4a.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

static void check(v4a_status status) {
  if (status != V4A_OK)
    throw std::runtime_error(std::string("v4a: ") + v4a_last_error());
}

int main(int argc, char **argv) try {
  if (argc != 7)
    throw std::runtime_error(
        "usage: decode PACKAGE LAYER BATCH PROMPT STEPS DIR");
  int64_t layer = std::stoll(argv[2]), batch = std::stoll(argv[3]);
  int64_t prompt = std::stoll(argv[4]), steps = std::stoll(argv[5]);
  std::string dir = argv[6];
  v4a_options options;
  v4a_options_init(&options);
  options.max_sequences = batch;
  options.layers = &layer;
  options.num_layers = 1;
  v4a_model *raw = nullptr;
  check(v4a_check_abi(V4A_ABI_VERSION));
  check(v4a_open_package(argv[1], &options, &raw));
  std::unique_ptr<v4a_model, void (*)(v4a_model *)> model(raw, v4a_free);
  check(v4a_load_random_weights(model.get(), 1));
  v4a_info info = {sizeof info};
  check(v4a_get_info(model.get(), &info));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<int64_t> sequences(batch);
  for (int64_t &sequence : sequences)
    check(v4a_add_sequence(model.get(), &sequence));
  for (int64_t k = 0; k <= steps; ++k) {
    std::vector<int64_t> lengths(batch, k ? 1 : prompt);
    int64_t tokens = batch * lengths[0];
    std::vector<char> host(tokens * info.hidden_size * 2);
    std::ifstream("" + dir + "/x" + std::to_string(k) + ".bf16",
                  std::ios::binary)
        .read(host.data(), host.size());
    void *x, *y;
    cudaMalloc(&x, host.size());
    cudaMalloc(&y, host.size());
    cudaMemcpyAsync(x, host.data(), host.size(), cudaMemcpyHostToDevice,
                    stream);
    v4a_tensor in{x, V4A_BF16, V4A_CUDA, 0, tokens, info.hidden_size}, out = in;
    out.data = y;
    check(v4a_step(model.get(), batch, sequences.data(), lengths.data(), &in,
                   &out, 1, stream));
    cudaMemcpyAsync(host.data(), y, host.size(), cudaMemcpyDeviceToHost,
                    stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess)
      throw std::runtime_error("step " + std::to_string(k) + " failed");
    std::ofstream(dir + "/y" + std::to_string(k) + ".cpp.bf16",
                  std::ios::binary)
        .write(host.data(), host.size());
    cudaFree(x);
    cudaFree(y);
  }
  std::printf("decode.cpp: %lld steps of %lld sequences\n",
              static_cast<long long>(steps + 1), static_cast<long long>(batch));
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
