/*===- v4a.h - the C ABI of v4a -------------------------------*- C -*-===*
 *
 * Runs the attention layers of a DeepSeek-V4-class model from an inference
 * engine's own buffers. Two libraries implement it:
 *   libv4a_runtime.so  runs packages (v4a-compile --target=sm_90a) on the
 *                      GPU; no compiler, MLIR or LLVM in the process.
 *   libv4a.so          the same, and compiles a configuration in-process
 *                      (v4a_compile) for the CPU or the GPU.
 *
 *   v4a_model *model = NULL;
 *   if (v4a_check_abi(V4A_ABI_VERSION) != V4A_OK ||
 *       v4a_open_package("layer.v4apkg", NULL, &model) != V4A_OK ||
 *       v4a_load_checkpoint(model, "model.safetensors.index.json") != V4A_OK)
 *     fprintf(stderr, "%s\n", v4a_last_error());
 *   int64_t seq;
 *   v4a_add_sequence(model, &seq);
 *   v4a_step(model, 1, &seq, &prompt_len, &x, &y, 1, stream);
 *
 * Every call returns a status; on failure the message is v4a_last_error()
 * (this thread's last failed call) and v4a_error(model). A failed call
 * changes nothing unless its description says otherwise.
 *
 * Threads: the functions without a model handle may be called from any
 * thread at any time. Calls on one model are serialized by the library (a
 * second thread waits); different models are independent. v4a_free must
 * not race with other calls on the same model.
 *
 *===----------------------------------------------------------------------===*/

#ifndef V4A_V4A_H
#define V4A_V4A_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes; v4a_check_abi compares the library's.
 * 2: v4a_options gained kv_layout, index_layout, tensor_parallel and
 * tensor_rank, v4a_info tensor_parallel and tensor_rank (a caller built
 * for 1 must be rebuilt: its options are smaller than what
 * v4a_options_init fills). */
#define V4A_ABI_VERSION 2

typedef enum v4a_status {
  V4A_OK = 0,
  /* A null pointer, a count, shape, dtype or memory kind that does not fit,
   * an unknown or released sequence id. */
  V4A_ERROR_INVALID_ARGUMENT = 1,
  /* No weights loaded yet (or loaded twice), no free sequence slot, or a
   * model that refuses steps after one failed on the device. */
  V4A_ERROR_INVALID_STATE = 2,
  /* Not in this library (compiling in libv4a_runtime.so) or this build. */
  V4A_ERROR_UNSUPPORTED = 3,
  /* The library implements another ABI than the caller's header. */
  V4A_ERROR_ABI_MISMATCH = 4,
  /* The operation failed: a missing, truncated or mismatched package or
   * checkpoint, an invalid configuration, the device or its memory. */
  V4A_ERROR_FAILED = 5
} v4a_status;

/* Element types of tensors. */
typedef enum v4a_dtype {
  V4A_F32 = 0,
  V4A_BF16 = 1,
  V4A_F16 = 2,
  V4A_F8_E4M3 = 3, /* weights: e4m3 values */
  V4A_F8_E8M0 = 4  /* weights: ue8m0 block scales */
} v4a_dtype;

/* Where a tensor's memory is. */
typedef enum v4a_memory { V4A_HOST = 0, V4A_CUDA = 1 } v4a_memory;

/* "v4a 0.11": the library's version. */
const char *v4a_version(void);
/* The ABI the library implements. */
int32_t v4a_abi_version(void);
/* V4A_OK when the library implements `header_abi` (pass V4A_ABI_VERSION). */
v4a_status v4a_check_abi(int32_t header_abi);
/* "V4A_ERROR_INVALID_ARGUMENT", ...; "unknown status" for other values. */
const char *v4a_status_name(v4a_status status);
/* The message of this thread's last failed call ("" when none failed);
 * valid until this thread's next call into the library. */
const char *v4a_last_error(void);

typedef struct v4a_model v4a_model;

typedef struct v4a_options {
  /* sizeof(v4a_options), set by v4a_options_init: later ABIs may append. */
  uint32_t struct_size;
  /* 1: decode-sized steps run as recorded CUDA graphs (the default). */
  int32_t use_graphs;
  /* Sequence slots the caches hold (default 4). */
  int64_t max_sequences;
  /* The layers to run: `num_layers` ids (0: every layer). A layer's
   * sharing sources must be selected too. */
  const int64_t *layers;
  int32_t num_layers;
  /* The GPU (CUDA device ordinal; default 0). */
  int32_t device;
  /* v4a_compile only: "cpu" (default) or "cuda"; the cache plan's context
   * (default 4096 tokens) and compressed rows per page (default 64). A
   * package carries its own plan and runs on the GPU: v4a_open_package
   * refuses a context or page size other than the default. */
  const char *backend;
  int64_t context_tokens;
  int64_t page_size;
  /* v4a_compile only: the compressed KV cache's rows, "bf16" (default) or
   * "fp8" (packed MODEL1 rows); the indexer's key rows, "bf16", "fp8" or
   * "mxfp4" (default). Null: the default. A package carries its own. */
  const char *kv_layout;
  const char *index_layout;
  /* v4a_compile only: rank `tensor_rank` of `tensor_parallel`-way tensor
   * parallelism (defaults 1 and 0): the rank's num_attention_heads / N heads
   * and o_groups / N output groups with its part of the weights; a step's
   * outputs are the rank's partial products of wo_b, to be summed over the
   * ranks in rank order. v4a_open_package takes tensor_rank for a package
   * compiled for a degree (v4a-compile --tensor-parallel): weights are
   * given whole and the rank keeps its part. */
  int32_t tensor_parallel;
  int32_t tensor_rank;
} v4a_options;

/* Sets every field to its default. */
void v4a_options_init(v4a_options *options);

/* Opens a package for the GPU `options->device` (null options: defaults).
 * The package's format, target and contents are checked; kernels load on
 * the device. */
v4a_status v4a_open_package(const char *path, const v4a_options *options,
                            v4a_model **model);
/* Parses, verifies and compiles a configuration (config.json text) for
 * options->backend. libv4a.so only: V4A_ERROR_UNSUPPORTED elsewhere. */
v4a_status v4a_compile(const char *config_json, const v4a_options *options,
                       v4a_model **model);
/* Releases the model, its caches and device memory (null: nothing). Work it
 * queued on a caller's stream must have finished or be waited for first. */
void v4a_free(v4a_model *model);
/* The message of the model's last failed call, "" when none failed; valid
 * until the next call on the model. */
const char *v4a_error(const v4a_model *model);

/* Weights: once per model (a second load is refused). */
/* A .safetensors file or a sharded checkpoint's
 * model.safetensors.index.json: the attention tensors of the selected
 * layers; other tensors are ignored. */
v4a_status v4a_load_checkpoint(v4a_model *model, const char *path);
/* Deterministic random weights (those of v4a-run-package
 * --random-weights SEED). */
v4a_status v4a_load_random_weights(v4a_model *model, uint64_t seed);

/* A caller-owned weight in host memory, named as in the checkpoint
 * ("layers.0.attn.wq_a.weight"); the library copies it. */
typedef struct v4a_weight {
  const char *name;
  v4a_dtype dtype;
  int32_t ndim; /* 0 to 4 */
  const int64_t *shape;
  const void *data; /* row-major, shape's product elements */
} v4a_weight;
/* Every attention tensor of the selected layers, checked as a checkpoint's
 * (names, shapes, dtypes). */
v4a_status v4a_load_weights(v4a_model *model, const v4a_weight *weights,
                            int64_t count);

/* A sequence at position 0 in a free slot (V4A_ERROR_INVALID_STATE when
 * every slot is taken). */
v4a_status v4a_add_sequence(v4a_model *model, int64_t *sequence);
/* Frees the sequence's slot for a later v4a_add_sequence. */
v4a_status v4a_release_sequence(v4a_model *model, int64_t sequence);
/* The tokens the sequence has processed. */
v4a_status v4a_position(v4a_model *model, int64_t sequence, int64_t *position);

/* An activation tensor: [rows, cols] row-major, contiguous. */
typedef struct v4a_tensor {
  void *data;
  v4a_dtype dtype;
  v4a_memory memory;
  int32_t device; /* the CUDA ordinal of V4A_CUDA memory */
  int64_t rows, cols;
} v4a_tensor;

/* One step over a varlen batch: `batch` sequences, sequences[b] advancing
 * by lengths[b] tokens (prefill chunks and decodes mixed). inputs[i] and
 * outputs[i] are the i-th selected layer's x and y (`num_tensors` = the
 * selected layers), [sum of lengths, hidden_size], tokens packed in batch
 * order.
 *   GPU models: bf16 device memory of the model's GPU, queued on `stream`
 *   (a CUstream of the device's primary context; null: the model's own)
 *   without synchronizing it; a fault on the device surfaces when the
 *   stream is synchronized, and the model then refuses further steps
 *   (v4a_synchronize reports it).
 *   CPU models: f32 or bf16 host memory, run before the call returns;
 *   `stream` must be null.
 * The step follows the model's earlier steps on any stream. Everything is
 * checked before anything runs. */
v4a_status v4a_step(v4a_model *model, int32_t batch, const int64_t *sequences,
                    const int64_t *lengths, const v4a_tensor *inputs,
                    const v4a_tensor *outputs, int32_t num_tensors,
                    void *stream);
/* Waits for the model's queued work (the steps on every stream included). */
v4a_status v4a_synchronize(v4a_model *model);

/* Tensor parallelism across GPUs, for a rank of a package compiled with
 * v4a-compile --tensor-parallel N (v4a_info tensor_parallel and
 * tensor_rank), one GPU a rank: once a model joins a communicator, every
 * step ends with its outputs summed over the ranks by NCCL (libnccl.so.2,
 * or $V4A_NCCL_LIBRARY) on the step's stream, in its graph when recorded,
 * so that every rank's outputs are the whole model's; every rank must then
 * run every step with the same batch. After the weights are loaded. */
/* A new communicator id: rank 0 makes it and hands it to the others. */
v4a_status v4a_make_communicator_id(uint8_t id[128]);
/* Joins the communicator `id` as the model's rank of its degree; returns
 * once every rank has joined (V4A_ERROR_FAILED after $V4A_NCCL_TIMEOUT
 * seconds, default 120, without them). */
v4a_status v4a_join_ranks(v4a_model *model, const uint8_t id[128]);
/* Or a communicator the caller made and keeps (an ncclComm_t, blocking or
 * settled) whose rank and size are the model's. */
v4a_status v4a_use_communicator(v4a_model *model, void *nccl_comm);

typedef struct v4a_info {
  /* sizeof(v4a_info): set by the caller. */
  uint32_t struct_size;
  int32_t num_layers;   /* the model's layers */
  int32_t num_selected; /* the layers that run */
  int32_t device;       /* the CUDA ordinal; -1 on the CPU */
  int64_t hidden_size;
  int64_t max_sequences;
  int64_t context_tokens;
  int64_t page_size;
  int64_t cache_bytes; /* every cache buffer of every slot */
  /* The weights in the model's memory (0 before they are loaded). */
  int64_t weight_bytes;
  /* The step workspace now: it grows to the largest step so far. */
  int64_t workspace_bytes;
  int32_t weights_loaded;
  char backend[8]; /* "cpu" or "cuda" */
  /* The model's tensor-parallel degree and rank (1 and 0 unless compiled
   * for ranks): a step's outputs are partial when the degree exceeds 1. */
  int32_t tensor_parallel;
  int32_t tensor_rank;
} v4a_info;
v4a_status v4a_get_info(v4a_model *model, v4a_info *info);
/* The ids of the selected layers: up to `capacity` into `ids`; `count`
 * gets how many there are. */
v4a_status v4a_selected_layers(v4a_model *model, int64_t *ids, int32_t capacity,
                               int32_t *count);
/* The bytes one sequence's cache buffer of a layer takes (component:
 * "window", "compressed", "index_keys", "compressor_state",
 * "indexer_state"; 0 when the layer has none; a consumer layer's resolve
 * to its source's). */
v4a_status v4a_cache_size(v4a_model *model, int64_t layer,
                          const char *component, int64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* V4A_V4A_H */
