#include "runtime/live/tp/mappings.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/live/tp/exchange.h"

namespace shardgym::live {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;

// Raw pointers travel through the autograd context as integers; their owners (the trainer's
// CommWorld and plans) outlive every graph built in a step.
template <typename T>
int64_t to_handle(T* p) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(p));
}
template <typename T>
T* from_handle(AutogradContext* ctx, const char* key) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(ctx->saved_data[key].toInt()));
}

at::Tensor all_reduced(const at::Tensor& x, Comm& g) {
  at::Tensor y = x.contiguous().clone();
  g.all_reduce(y);
  return y;
}

at::Tensor own_slice(const at::Tensor& x, Comm& g, int64_t dim) {
  return x.chunk(g.size(), dim)[g.rank()].contiguous();
}

// Pattern of the seven mappings: (forward op, backward op) over one group along one dim.
enum class Op { kIdentity, kAllReduce, kSlice, kAllGather, kReduceScatter };

at::Tensor apply_op(Op op, const at::Tensor& x, Comm& g, int64_t dim) {
  switch (op) {
    case Op::kIdentity: return x;
    case Op::kAllReduce: return all_reduced(x, g);
    case Op::kSlice: return own_slice(x, g, dim);
    case Op::kAllGather: return g.all_gather(x.contiguous(), dim);
    case Op::kReduceScatter: return g.reduce_scatter(x.contiguous(), dim);
  }
  return x;
}

struct Mapping : public Function<Mapping> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Comm* g, int64_t dim,
                            int64_t fwd, int64_t bwd) {
    ctx->saved_data["comm"] = to_handle(g);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["bwd"] = bwd;
    return apply_op(static_cast<Op>(fwd), x, *g, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Comm* g = from_handle<Comm>(ctx, "comm");
    const auto op = static_cast<Op>(ctx->saved_data["bwd"].toInt());
    at::Tensor dx = apply_op(op, grads[0], *g, ctx->saved_data["dim"].toInt());
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor mapping(const at::Tensor& x, Comm& g, int64_t dim, Op fwd, Op bwd) {
  if (g.size() == 1) return x;
  if (dim < 0) dim += x.dim();
  return Mapping::apply(x, &g, dim, static_cast<int64_t>(fwd), static_cast<int64_t>(bwd));
}

// g, split: forward starts the all-reduce of a copy and returns it (filled in by the backend);
// backward is g's identity.
struct StartReduce : public Function<StartReduce> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, Comm* g,
                            std::unique_ptr<CommWork>* work) {
    at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
    *work = g->all_reduce_async(y);
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

// The pending gradient all-reduce shared by the two halves of a split f. A CustomClassHolder
// so that both autograd nodes can keep it alive (as an IValue capsule) for as long as the
// graph lives; no registration is involved.
struct GradAllReduce::Slot : public torch::CustomClassHolder {
  std::unique_ptr<CommWork> work;
};

namespace {

c10::IValue capsule(const c10::intrusive_ptr<GradAllReduce::Slot>& slot) {
  return c10::IValue::make_capsule(slot);
}
GradAllReduce::Slot& slot_of(AutogradContext* ctx) {
  return *static_cast<GradAllReduce::Slot*>(ctx->saved_data["slot"].toCapsule().get());
}

// f, split: forward identity; backward starts the all-reduce of a copy of the gradient and
// returns that copy, which only AwaitGrad (the next node of the backward on this path) reads.
struct StartGradReduce : public Function<StartGradReduce> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Comm* g,
                            c10::IValue slot) {
    ctx->saved_data["comm"] = to_handle(g);
    ctx->saved_data["slot"] = std::move(slot);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor dx = grads[0].clone(at::MemoryFormat::Contiguous);
    slot_of(ctx).work = from_handle<Comm>(ctx, "comm")->all_reduce_async(dx);
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct AwaitGrad : public Function<AwaitGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::IValue slot) {
    ctx->saved_data["slot"] = std::move(slot);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& slot = slot_of(ctx);
    if (slot.work) {
      slot.work->wait();
      slot.work.reset();
    }
    return {grads[0], at::Tensor()};
  }
};

struct Redistribute : public Function<Redistribute> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const ExchangePlan* fwd,
                            const ExchangePlan* bwd, Comm* world) {
    ctx->saved_data["bwd"] = to_handle(bwd);
    ctx->saved_data["world"] = to_handle(world);
    return fwd->run(*world, {x})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto* bwd = from_handle<const ExchangePlan>(ctx, "bwd");
    Comm* world = from_handle<Comm>(ctx, "world");
    return {bwd->run(*world, {grads[0]})[0], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct Probe : public Function<Probe> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const std::function<void()>* hook) {
    ctx->saved_data["hook"] = to_handle(hook);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    (*from_handle<const std::function<void()>>(ctx, "hook"))();
    return {grads[0], at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_group(const at::Tensor& x, Comm& group) {
  return mapping(x, group, 0, Op::kIdentity, Op::kAllReduce);
}
at::Tensor reduce_from_group(const at::Tensor& x, Comm& group) {
  return mapping(x, group, 0, Op::kAllReduce, Op::kIdentity);
}
at::Tensor sum_over_group(const at::Tensor& x, Comm& group) {
  return mapping(x, group, 0, Op::kAllReduce, Op::kAllReduce);
}
at::Tensor scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim) {
  return mapping(x, group, dim, Op::kSlice, Op::kAllGather);
}
at::Tensor gather_from_group(const at::Tensor& x, Comm& group, int64_t dim) {
  return mapping(x, group, dim, Op::kAllGather, Op::kSlice);
}
at::Tensor gather_to_parallel(const at::Tensor& x, Comm& group, int64_t dim) {
  return mapping(x, group, dim, Op::kAllGather, Op::kReduceScatter);
}
at::Tensor reduce_scatter_to_group(const at::Tensor& x, Comm& group, int64_t dim) {
  return mapping(x, group, dim, Op::kReduceScatter, Op::kAllGather);
}

at::Tensor reduce_from_group_async(const at::Tensor& x, Comm& group,
                                   std::unique_ptr<CommWork>* work) {
  if (group.size() == 1) {
    work->reset();
    return x;
  }
  return StartReduce::apply(x, &group, work);
}

GradAllReduce::GradAllReduce() : slot_(c10::make_intrusive<Slot>()) {}
GradAllReduce::~GradAllReduce() = default;
GradAllReduce::GradAllReduce(const GradAllReduce&) = default;
GradAllReduce& GradAllReduce::operator=(const GradAllReduce&) = default;

at::Tensor await_grad_all_reduce(const at::Tensor& x, const GradAllReduce& link) {
  return AwaitGrad::apply(x, capsule(link.slot_));
}

at::Tensor copy_to_group_async(const at::Tensor& x, Comm& group, const GradAllReduce& link) {
  if (group.size() == 1) return x;
  return StartGradReduce::apply(x, &group, capsule(link.slot_));
}

at::Tensor redistribute(const at::Tensor& x, const ExchangePlan& forward_plan,
                        const ExchangePlan& backward_plan, Comm& world) {
  return Redistribute::apply(x, &forward_plan, &backward_plan, &world);
}

at::Tensor backward_probe(const at::Tensor& x, const std::function<void()>* hook) {
  return Probe::apply(x, hook);
}

}  // namespace shardgym::live
