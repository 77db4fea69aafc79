// A C++ program against an installed v4a: the JIT API on the CPU.
#include <v4a/Engine.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

int main(int argc, char **argv) {
  std::stringstream config;
  config << std::ifstream(argv[1]).rdbuf();
  std::string error;
  auto engine = v4a::Engine::create(config.str(), {}, error);
  if (!engine || !engine->loadRandomWeights(1, error))
    return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  int64_t seq = engine->addSequence(error), dim = engine->config().hiddenSize;
  size_t layers = engine->config().numLayers();
  std::vector<float> x(5 * dim, 0.5f), y(5 * dim);
  std::vector<const float *> in(layers, x.data());
  std::vector<float *> out(layers, y.data());
  if (!engine->step({{seq}, {5}, 5}, in, out, error))
    return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  std::printf("engine.cpp: %zu layers, y[0] = %g\n", layers, y[0]);
  return 0;
}
