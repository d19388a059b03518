#pragma once
// `rmt step-dump`: training steps of a checkpoint on a given batch, with their tensors written
// out, so the golden tests (tests/reference/test_golden.py) can compare them with the PyTorch
// reference model on the same weights and batch. Both modes run the training step's code
// (lib/run/train_step.h, lib/run/lm.h).
//
// Scored-answer step (segment_length 0), OUT_DIR:
//   logits.npy          float32 [B, T, V], segments concatenated (forward without dropout)
//   loss.json           {"loss": ...}
//   grads.safetensors   the gradients of that loss (before clipping), authors' names
//   adam.json           with adam_steps > 0: {"losses": [...]} the loss before each step
//   after.safetensors   with adam_steps > 0: the parameters after the steps
// Language-model steps (segment_length T): the rows are B streams of S x T positions; step s
// trains on segment s of every stream with the state the step before carried; OUT_DIR/step<s>/
// holds the parameters it started from (params.safetensors), the new segment's logits
// [B, T, V], its loss and the gradients; with update, each step ends with clip and Adam.
#include <cstdint>
#include <string>
#include <vector>

namespace rmt {

// The files step_dump may write into its output directory (which of them depends on the request).
extern const std::vector<std::string> kStepDumpFiles;

struct StepDumpRequest {
  std::string checkpoint;   // model checkpoint (.safetensors)
  std::string input;        // int64 .npy [B, T] input ids
  std::string target;       // int64 .npy [B, T] target ids
  std::string out;          // output directory (created)
  std::string device = "cpu";  // the backend (backend_by_name)
  int bptt = -1;            // -1 = all, else k
  double lr = 1e-3, clip = 0.25;
  double weight_decay = 0;  // AdamW's, as train.weight_decay (0: Adam)
  // scored-answer step
  int segments = 1;
  int answer_size = 0;      // scored positions at the end of each row, 1..T
  int adam_steps = 0;       // also take this many train_step()s on the batch
  // language-model steps
  int segment_length = 0;   // > 0: language-model steps over segments of this length
  bool update = false;      // clip and Adam after each step
  int delta_chunk = -1;     // deltanet / gated_deltanet: model.delta_chunk (-1: the default's)
};

struct StepDumpResult {
  // the loss of the first forward (scored answer), or of each language-model step
  std::vector<double> losses;
};

// Checks the files against each other and the checkpoint (shapes, ids inside the vocabulary,
// memory), then runs and writes everything above. Fails (rmt::Error) naming the file and what
// does not fit.
StepDumpResult step_dump(const StepDumpRequest& request);

}  // namespace rmt
