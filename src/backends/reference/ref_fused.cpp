// The fused ops (src/ops/ops_fused.cpp) as their unfused pairs compute them:
// the product's reference kernel, then the follower over its output in
// double, rounded once, as ref_relu and ref_add do.
#include <cstddef>
#include <vector>

#include "backends/reference/ref_ops.h"

namespace memfit {
namespace {

// Runs `product` (conv2d or linear) on the fused node's inputs `inputs`, into
// its output.
void run_product(const RefCall& call, OpKind product, const std::vector<size_t>& inputs) {
  Node node = call.node;
  node.op = product;
  node.inputs.clear();
  std::vector<TensorType> types;
  std::vector<void*> buffers;
  for (size_t i : inputs) {
    node.inputs.push_back(call.node.inputs[i]);
    types.push_back(call.in[i]);
    buffers.push_back(call.args.inputs[i]);
  }
  KernelArgs args = call.args;
  args.inputs = buffers;
  reference_kernel(product)(RefCall{node, types, call.out, args});
}

void relu_in_place(const RefCall& call) {
  float* y = call.out_f32(0);
  const int64_t count = num_elements(call.out[0].shape);
  for (int64_t i = 0; i < count; ++i) {
    const double x = y[i];
    y[i] = static_cast<float>(x > 0.0 ? x : 0.0);
  }
}

std::vector<size_t> first(size_t n) {
  std::vector<size_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(i);
  return out;
}

}  // namespace

void ref_conv2d_relu(const RefCall& call) {
  run_product(call, OpKind::conv2d, first(call.in.size()));
  relu_in_place(call);
}

// y = conv2d(x, w [, b]) + r; r may share y's buffer, so it is read first.
void ref_conv2d_add(const RefCall& call) {
  const int64_t count = num_elements(call.out[0].shape);
  const float* r_buffer = call.in_f32(2);
  const std::vector<float> r(r_buffer, r_buffer + count);
  std::vector<size_t> product = {0, 1};
  if (call.in.size() == 4) product.push_back(3);
  run_product(call, OpKind::conv2d, product);
  float* y = call.out_f32(0);
  for (int64_t i = 0; i < count; ++i) {
    y[i] = static_cast<float>(static_cast<double>(y[i]) + static_cast<double>(r[static_cast<size_t>(i)]));
  }
}

void ref_linear_relu(const RefCall& call) {
  run_product(call, OpKind::linear, first(call.in.size()));
  relu_in_place(call);
}

}  // namespace memfit
