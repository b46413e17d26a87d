// The reference backend: every node runs its plain-loop kernel on plain
// row-major buffers. Kernels keep their double accumulators on the host heap;
// they take no planned workspace.
#include <memory>
#include <utility>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/reference_kernels.h"
#include "core/check.h"
#include "ops/op_table.h"

namespace memfit {

RefKernelFn reference_kernel(OpKind op) {
  // No default: -Wswitch (an error here) names any op of the list without a case.
  switch (op) {
    case OpKind::matmul:
      return &ref_matmul;
    case OpKind::linear:
      return &ref_linear;
    case OpKind::conv2d:
      return &ref_conv2d;
    case OpKind::conv2d_relu:
      return &ref_conv2d_relu;
    case OpKind::conv2d_add:
      return &ref_conv2d_add;
    case OpKind::linear_relu:
      return &ref_linear_relu;
    case OpKind::conv2d_grad_input:
      return &ref_conv2d_grad_input;
    case OpKind::conv2d_grad_weight:
      return &ref_conv2d_grad_weight;
    case OpKind::conv3d:
      return &ref_conv3d;
    case OpKind::conv3d_grad_input:
      return &ref_conv3d_grad_input;
    case OpKind::conv3d_grad_weight:
      return &ref_conv3d_grad_weight;
    case OpKind::conv_transpose2d:
      return &ref_conv_transpose2d;
    case OpKind::conv_transpose3d:
      return &ref_conv_transpose3d;
    case OpKind::max_pool2d:
      return &ref_max_pool2d;
    case OpKind::max_pool2d_grad:
      return &ref_max_pool2d_grad;
    case OpKind::avg_pool2d:
      return &ref_avg_pool2d;
    case OpKind::avg_pool2d_grad:
      return &ref_avg_pool2d_grad;
    case OpKind::max_pool3d:
      return &ref_max_pool3d;
    case OpKind::max_pool3d_grad:
      return &ref_max_pool3d_grad;
    case OpKind::avg_pool3d:
      return &ref_avg_pool3d;
    case OpKind::avg_pool3d_grad:
      return &ref_avg_pool3d_grad;
    case OpKind::upsample:
      return &ref_upsample;
    case OpKind::upsample_grad:
      return &ref_upsample_grad;
    case OpKind::global_avg_pool:
      return &ref_global_avg_pool;
    case OpKind::global_avg_pool_grad:
      return &ref_global_avg_pool_grad;
    case OpKind::batch_norm:
      return &ref_batch_norm;
    case OpKind::batch_norm_grad:
      return &ref_batch_norm_grad;
    case OpKind::batch_norm_inference:
      return &ref_batch_norm_inference;
    case OpKind::batch_norm_inference_grad:
      return &ref_batch_norm_inference_grad;
    case OpKind::layer_norm:
      return &ref_layer_norm;
    case OpKind::layer_norm_grad:
      return &ref_layer_norm_grad;
    case OpKind::relu:
      return &ref_relu;
    case OpKind::relu_grad:
      return &ref_relu_grad;
    case OpKind::gelu:
      return &ref_gelu;
    case OpKind::gelu_grad:
      return &ref_gelu_grad;
    case OpKind::tanh:
      return &ref_tanh;
    case OpKind::tanh_grad:
      return &ref_tanh_grad;
    case OpKind::sigmoid:
      return &ref_sigmoid;
    case OpKind::sigmoid_grad:
      return &ref_sigmoid_grad;
    case OpKind::add:
      return &ref_add;
    case OpKind::sub:
      return &ref_sub;
    case OpKind::mul:
      return &ref_mul;
    case OpKind::scale:
      return &ref_scale;
    case OpKind::dropout:
      return &ref_dropout;
    case OpKind::reshape:
      return &ref_reshape;
    case OpKind::reorder:  // plain to plain: the only layouts this backend reads
      return &ref_copy;
    case OpKind::broadcast_to:
      return &ref_broadcast_to;
    case OpKind::transpose:
      return &ref_transpose;
    case OpKind::concat:
      return &ref_concat;
    case OpKind::slice:
      return &ref_slice;
    case OpKind::slice_grad:
      return &ref_slice_grad;
    case OpKind::split:
      return &ref_split;
    case OpKind::pad:
      return &ref_pad;
    case OpKind::pad_grad:
      return &ref_pad_grad;
    case OpKind::embedding:
      return &ref_embedding;
    case OpKind::embedding_grad:
      return &ref_embedding_grad;
    case OpKind::causal_mask:
      return &ref_causal_mask;
    case OpKind::attention:
      return &ref_attention;
    case OpKind::attention_grad:
      return &ref_attention_grad;
    case OpKind::where:
      return &ref_where;
    case OpKind::lstm_cell:
      return &ref_lstm_cell;
    case OpKind::lstm_cell_grad:
      return &ref_lstm_cell_grad;
    case OpKind::softmax:
      return &ref_softmax;
    case OpKind::softmax_grad:
      return &ref_softmax_grad;
    case OpKind::log_softmax:
      return &ref_log_softmax;
    case OpKind::log_softmax_grad:
      return &ref_log_softmax_grad;
    case OpKind::softmax_cross_entropy:
      return &ref_softmax_cross_entropy;
    case OpKind::softmax_cross_entropy_grad:
      return &ref_softmax_cross_entropy_grad;
    case OpKind::reduce_sum:
      return &ref_reduce_sum;
    case OpKind::reduce_mean:
      return &ref_reduce_mean;
    case OpKind::fill:
      return &ref_fill;
    case OpKind::sgd_update:
      return &ref_sgd_update;
    case OpKind::adamw_update:
      return &ref_adamw_update;
    case OpKind::to_host:
    case OpKind::to_device:
      return &ref_copy;
    case OpKind::swap_wait:
      return &ref_swap_wait;
    case OpKind::all_reduce_start:
    case OpKind::reduce_scatter_start:
      return &ref_bucket_pack;
    case OpKind::all_reduce_wait:
    case OpKind::all_gather_wait:
      return &ref_bucket_unpack;
    case OpKind::reduce_scatter_wait:
      return &ref_reduce_scatter_wait;
    case OpKind::shard_pack:
      return &ref_shard_pack;
    case OpKind::all_gather_start:
      return &ref_all_gather_start;
  }
  MEMFIT_CHECK(false);  // an OpKind outside the list
  return nullptr;
}

namespace {

// Owns a copy of its node and of its operand types, so it does not depend on
// the graph outliving the compiled executable.
class ReferenceKernel final : public Kernel {
 public:
  ReferenceKernel(Node node, std::vector<TensorType> in, std::vector<TensorType> out)
      : node_(std::move(node)),
        in_(std::move(in)),
        out_(std::move(out)),
        fn_(reference_kernel(node_.op)) {}

  void run(const KernelArgs& args) override {
    MEMFIT_CHECK(args.inputs.size() == in_.size() && args.outputs.size() == out_.size());
    fn_(RefCall{node_, in_, out_, args});
  }

 private:
  Node node_;
  std::vector<TensorType> in_;
  std::vector<TensorType> out_;
  RefKernelFn fn_;
};

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  bool supports(const Graph&, const Node&) const override { return true; }

  Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId id) const override {
    const Node& node = graph.node(id);
    // Copy ops and the all-reduce's buckets move bytes in any layout.
    const bool moves_bytes = op_info(node.op).copy || std::holds_alternative<BucketAttrs>(node.attrs);
    if (!moves_bytes) {
      for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs}) {
        for (ValueId v : *values) {
          if (graph.value(v).layout == Layout::plain) continue;
          return Status::error("the reference kernel of " + std::string(op_name(node.op)) +
                               " reads plain layouts only, but %" + graph.value(v).name +
                               " is in layout " + std::string(layout_name(graph.value(v).layout)));
        }
      }
    }
    std::vector<TensorType> in;
    for (ValueId v : node.inputs) in.push_back(graph.value(v).type);
    std::vector<TensorType> out;
    for (ValueId v : node.outputs) out.push_back(graph.value(v).type);
    std::unique_ptr<Kernel> kernel =
        std::make_unique<ReferenceKernel>(node, std::move(in), std::move(out));
    return kernel;
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace memfit
