// One table of names per technique enum (include/memfit/techniques.h): the
// order of each table is the order the command line lists the names in.
#include "memfit/techniques.h"

namespace memfit {
namespace {

template <typename Enum>
struct Named {
  Enum value;
  std::string_view name;
};

template <typename Enum>
struct Table;

template <>
struct Table<BackendKind> {
  static constexpr std::string_view kWhat = "backend";
  static constexpr Named<BackendKind> kEntries[] = {{BackendKind::cpu, "cpu"},
                                                    {BackendKind::reference, "reference"},
                                                    {BackendKind::cuda, "cuda"}};
};
template <>
struct Table<Recompute> {
  static constexpr std::string_view kWhat = "recompute strategy";
  static constexpr Named<Recompute> kEntries[] = {
      {Recompute::none, "none"},           {Recompute::sqrt, "sqrt"},
      {Recompute::budget, "budget"},       {Recompute::recursive, "recursive"},
      {Recompute::optimal, "optimal"},     {Recompute::milp, "milp"}};
};
template <>
struct Table<CostModel> {
  static constexpr std::string_view kWhat = "cost model";
  static constexpr Named<CostModel> kEntries[] = {{CostModel::roofline, "roofline"},
                                                  {CostModel::measured, "measured"}};
};
template <>
struct Table<Swap> {
  static constexpr std::string_view kWhat = "swap policy";
  static constexpr Named<Swap> kEntries[] = {{Swap::none, "none"},
                                             {Swap::refcount, "refcount"},
                                             {Swap::budget, "budget"},
                                             {Swap::tflms, "tflms"}};
};
template <>
struct Table<Policy> {
  static constexpr std::string_view kWhat = "policy";
  static constexpr Named<Policy> kEntries[] = {{Policy::none, "none"},
                                               {Policy::share, "share"},
                                               {Policy::recompute, "recompute"},
                                               {Policy::swap, "swap"},
                                               {Policy::automatic, "auto"}};
};
template <>
struct Table<TflmsTrigger> {
  static constexpr std::string_view kWhat = "swap trigger";
  static constexpr Named<TflmsTrigger> kEntries[] = {
      {TflmsTrigger::chain_rule, "chain_rule"}, {TflmsTrigger::direct_order, "direct_order"}};
};
template <>
struct Table<OptimizerConfig::Kind> {
  static constexpr std::string_view kWhat = "optimizer";
  static constexpr Named<OptimizerConfig::Kind> kEntries[] = {
      {OptimizerConfig::Kind::sgd, "sgd"}, {OptimizerConfig::Kind::adamw, "adamw"}};
};
template <>
struct Table<Schedule> {
  static constexpr std::string_view kWhat = "learning-rate schedule";
  static constexpr Named<Schedule> kEntries[] = {{Schedule::constant, "constant"},
                                                 {Schedule::cosine, "cosine"},
                                                 {Schedule::linear, "linear"}};
};

template <typename Enum>
std::string_view lookup(Enum value) {
  for (const Named<Enum>& entry : Table<Enum>::kEntries) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

}  // namespace

std::string_view name_of(BackendKind value) { return lookup(value); }
std::string_view name_of(Recompute value) { return lookup(value); }
std::string_view name_of(CostModel value) { return lookup(value); }
std::string_view name_of(Swap value) { return lookup(value); }
std::string_view name_of(Policy value) { return lookup(value); }
std::string_view name_of(TflmsTrigger value) { return lookup(value); }
std::string_view name_of(OptimizerConfig::Kind value) { return lookup(value); }
std::string_view name_of(Schedule value) { return lookup(value); }

template <typename Enum>
std::vector<std::string> names_of() {
  std::vector<std::string> names;
  for (const Named<Enum>& entry : Table<Enum>::kEntries) names.emplace_back(entry.name);
  return names;
}

template <typename Enum>
Result<Enum> parse_name(std::string_view text) {
  for (const Named<Enum>& entry : Table<Enum>::kEntries) {
    if (entry.name == text) return entry.value;
  }
  // "use a, b or c"
  const std::vector<std::string> names = names_of<Enum>();
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return Status::error("unknown " + std::string(Table<Enum>::kWhat) + " '" + std::string(text) +
                       "'; use " + list);
}

#define MEMFIT_NAMED_ENUM(Enum)                                          \
  template Result<Enum> parse_name<Enum>(std::string_view text);        \
  template std::vector<std::string> names_of<Enum>();
MEMFIT_NAMED_ENUM(BackendKind)
MEMFIT_NAMED_ENUM(Recompute)
MEMFIT_NAMED_ENUM(CostModel)
MEMFIT_NAMED_ENUM(Swap)
MEMFIT_NAMED_ENUM(Policy)
MEMFIT_NAMED_ENUM(TflmsTrigger)
MEMFIT_NAMED_ENUM(OptimizerConfig::Kind)
MEMFIT_NAMED_ENUM(Schedule)
#undef MEMFIT_NAMED_ENUM

}  // namespace memfit
