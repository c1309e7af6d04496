// Optimizers that apply a gradient to float32 parameters and their slots, with Keras'
// (TF2 optimizer_v2) update rules:
//
//   SGD       p -= lr * g
//   MOMENTUM  v = momentum * v - lr * g;  p += v                      (slot 0: v, "momentum")
//             nesterov: v = momentum * v - lr * g;  p += momentum * v - lr * g
//   ADAGRAD   acc += g * g;  p -= lr * g / (sqrt(acc) + epsilon)      (slot 0: "accumulator")
//   ADAM      lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//             m = beta1 * m + (1 - beta1) * g                          (slot 0: "adam_m")
//             v = beta2 * v + (1 - beta2) * g * g                      (slot 1: "adam_v")
//             p -= lr_t * m / (sqrt(v) + epsilon)
//             (Keras' epsilon is the paper's "epsilon hat", added to sqrt(v) as is.)
//   FTRL      FTRL-Proximal as TF's Ftrl / ResourceApplyFtrlV2 (slot 0: "accumulator",
//             slot 1: "linear"), with power = learning_rate_power:
//               g_s = g + 2 * l2_shrinkage * p
//               acc_new = acc + g * g
//               linear += g_s - (acc_new^(-power) - acc^(-power)) / lr * p
//               quadratic = acc_new^(-power) / lr + 2 * (l2 + beta / (2 * lr))
//               p = |linear| > l1 ? (sign(linear) * l1 - linear) / quadratic : 0
//               acc = acc_new
//             The accumulator starts at initial_accumulator_value, linear at 0.
//   NOOP      validates the spec and leaves everything unchanged.
//
// Every rule may decay its lr (Keras' ExponentialDecay): update t uses
// lr * decay_rate ^ ((t - 1) / decay_steps), the exponent floored when staircase.
//
// Defaults: a field that is 0 takes TF's default: ADAGRAD and FTRL initial_accumulator_value
// 0.1, epsilon 1e-7 (ADAGRAD, ADAM), ADAM beta1 0.9 and beta2 0.999. So an exact 0 cannot be
// asked for in those fields. momentum 0 means plain SGD steps (Keras' default). FTRL's
// learning_rate_power has presence: unset is TF's -0.5, and 0 when set is a plain 0. FTRL's
// l1, l2, l2_shrinkage and beta default to 0 as in TF.
//
// The row-sparse apply is "lazy" (TF's sparse apply ops, Keras' LazyAdam): only the given
// rows' parameters and slots change; Adam's moments of other rows do not decay. The step t
// (Adam) is passed in by the caller: the shard counts its own updates.
//
// An Optimizer holds only its hyperparameters: it is immutable after Create, so one object may
// be used by any number of threads at once; the caller serializes access to the buffers.
#ifndef SHARDPS_MATH_OPTIMIZER_H_
#define SHARDPS_MATH_OPTIMIZER_H_

#include <cstdint>
#include <array>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace shardps {

// Where the rows of a shard's parameters are: in blocks of 2^block_shift rows, row r at
// blocks[r >> block_shift] + (r mod 2^block_shift) * width. (ShardStore keeps parameters in
// blocks so that a pull can send them without a copy; ps_server/param_blocks.h.) A contiguous
// buffer is one block: Contiguous(&pointer, width).
struct RowBlocks {
  float* const* blocks;
  int block_shift;
  int64_t width;

  float* Row(int64_t r) const {
    return blocks[r >> block_shift] + (r & ((int64_t{1} << block_shift) - 1)) * width;
  }
  // REQUIRES: *base outlives the result.
  static RowBlocks Contiguous(float* const* base, int64_t width) { return {base, 62, width}; }
};

class Optimizer {
 public:
  // The most slots any optimizer uses (Adam: m and v; FTRL: accumulator and linear).
  static constexpr int kMaxSlots = 2;

  // Checks hyperparameters: learning_rate > 0 and finite; momentum in [0, 1); beta1, beta2 in
  // [0, 1) and epsilon, initial_accumulator_value >= 0 and finite (after defaults); FTRL's
  // learning_rate_power <= 0 and l1, l2, l2_shrinkage, beta >= 0, all finite. Only the
  // fields the type uses are checked beyond learning_rate. INVALID_ARGUMENT names the field.
  static absl::Status Validate(const OptimizerSpec& spec);
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerSpec& spec);

  virtual ~Optimizer() = default;

  // How many slot buffers, each the size of the parameters, the optimizer needs.
  virtual int num_slots() const = 0;
  // The value a slot starts at (and returns to on reset): Adagrad's and FTRL's accumulator
  // start at initial_accumulator_value, everything else at 0.
  virtual float initial_slot_value(int slot) const = 0;

  // Applies `grad` to params[0 .. grad.size()) and slots[s][0 .. grad.size()).
  // `step` is the 1-based count of this update of the shard (Adam's t).
  // REQUIRES: slots.size() == num_slots(); every buffer holds grad.size() floats.
  void ApplyDense(int64_t step, absl::Span<const float> grad, float* params,
                  absl::Span<float* const> slots) const {
    ApplyDenseScaled(step, 1.0, grad, params, slots);
  }

  // Applies grad row k (grad + k * width) to row rows[k] of params and of each slot (the
  // slots are laid out in blocks as the parameters are). Rows not listed are untouched.
  // Each row is applied once per listed occurrence, so callers sum duplicate ids first.
  // REQUIRES: slots.size() == num_slots(); every rows[k] is a row of the buffers; grad
  // holds rows.size() * width floats.
  void ApplyRows(int64_t step, absl::Span<const int64_t> rows, const float* grad,
                 const RowBlocks& params, absl::Span<const RowBlocks> slots) const {
    ApplyRowsScaled(step, 1.0, rows, grad, params, slots);
  }

  // The same two with this update's learning rate (after decay; Adam's lr_t) multiplied by
  // `lr_scale` > 0: a staleness-aware update (ps_server/staleness.h). A scale of 1 is
  // bit-identical to the unscaled call.
  virtual void ApplyDenseScaled(int64_t step, double lr_scale, absl::Span<const float> grad,
                                float* params, absl::Span<float* const> slots) const = 0;
  virtual void ApplyRowsScaled(int64_t step, double lr_scale, absl::Span<const int64_t> rows,
                               const float* grad, const RowBlocks& params,
                               absl::Span<const RowBlocks> slots) const = 0;

  // The finiteness check of an update, before it is applied: the index of the first element
  // (into `grad`; for rows, k * width + column of row rows[k]) whose parameter or a slot the
  // same update (ApplyDenseScaled / ApplyRowsScaled with these arguments) would leave NaN or
  // infinite, or grad.size() (rows.size() * width) when none would. Reads only: the update
  // is computed, bit for bit as the apply computes it, on a small copy of each piece of the
  // buffers (every rule is elementwise), so a caller can refuse an update that would overflow
  // a parameter or a slot (SGD's p - lr * g, Adam's v + g * g) and leave everything as it was.
  // REQUIRES: as for the applies.
  virtual int64_t FirstNonFiniteDense(int64_t step, double lr_scale,
                                      absl::Span<const float> grad, const float* params,
                                      absl::Span<const float* const> slots) const = 0;
  virtual int64_t FirstNonFiniteRows(int64_t step, double lr_scale,
                                     absl::Span<const int64_t> rows, const float* grad,
                                     const RowBlocks& params,
                                     absl::Span<const RowBlocks> slots) const = 0;

  // Where the values of a buffer's parameters ([0]) and of each slot ([1 + s]) lie.
  struct Ranges {
    std::array<double, 1 + kMaxSlots> lo{};
    std::array<double, 1 + kMaxSlots> hi{};
  };
  // The cheap form of that check, for a dense update: given the ranges of the values before
  // it and the largest |gradient|, ranges that hold every value after the update (of any
  // part of the buffers: the ranges include `before`) when the optimizer's rule bounds them
  // and everything the update computes stays below kSafeMagnitude, so that nothing can
  // overflow or become NaN; nullopt otherwise (the exact check then decides). FTRL: nullopt.
  static constexpr double kSafeMagnitude = 1e30;
  virtual std::optional<Ranges> RangesAfter(int64_t step, double lr_scale, double max_abs_grad,
                                            const Ranges& before) const = 0;

  // The name of slot `slot` (checkpoint tensors are "<shard>/<slot name>"): MOMENTUM's
  // "momentum", ADAGRAD's "accumulator", ADAM's "adam_m" and "adam_v", FTRL's "accumulator"
  // and "linear".
  // REQUIRES: 0 <= slot < num_slots().
  virtual absl::string_view slot_name(int slot) const = 0;
};

}  // namespace shardps

#endif  // SHARDPS_MATH_OPTIMIZER_H_
