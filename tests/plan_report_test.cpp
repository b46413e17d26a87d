// `memfit plan`'s library side: byte counts, the plan of a training step
// (equal to what training allocates), its phases and timeline, and the JSON,
// text and SVG forms of the report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "memfit/plan.h"
#include "train/training_program.h"

namespace memfit {
namespace {

// A small JSON reader, strict enough to reject what a hand-written writer
// could get wrong: commas, quotes, escapes, trailing text.
struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  double number = 0;
  std::string text;  // a string's contents; "true"/"false" for booleans
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  // The one value the whole text holds; false on any syntax error.
  bool read_document(Json& out) {
    if (!read_value(out)) return false;
    skip_space();
    return pos_ == text_.size();
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool read_string(std::string& out) {
    if (!eat('"')) return false;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        const char e = text_[pos_++];
        if (e == 'u') {
          if (pos_ + 4 > text_.size()) return false;
          c = static_cast<char>(std::stoi(std::string(text_.substr(pos_, 4)), nullptr, 16));
          pos_ += 4;
        } else if (e == '"' || e == '\\' || e == '/') {
          c = e;
        } else if (e == 'n') {
          c = '\n';
        } else {
          return false;
        }
      }
      out += c;
    }
    return eat('"');
  }
  bool read_value(Json& out) {
    skip_space();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') {
      out.kind = Json::Kind::object;
      ++pos_;
      if (eat('}')) return true;
      do {
        std::string key;
        Json value;
        if (!read_string(key) || !eat(':') || !read_value(value)) return false;
        if (!out.fields.emplace(key, value).second) return false;  // duplicate key
      } while (eat(','));
      return eat('}');
    }
    if (c == '[') {
      out.kind = Json::Kind::array;
      ++pos_;
      if (eat(']')) return true;
      do {
        out.items.emplace_back();
        if (!read_value(out.items.back())) return false;
      } while (eat(','));
      return eat(']');
    }
    if (c == '"') {
      out.kind = Json::Kind::string;
      return read_string(out.text);
    }
    for (std::string_view word : {"true", "false", "null"}) {
      if (text_.substr(pos_, word.size()) == word) {
        out.kind = word == "null" ? Json::Kind::null : Json::Kind::boolean;
        out.text = std::string(word);
        pos_ += word.size();
        return true;
      }
    }
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
            std::string_view("-+.eE").find(text_[pos_]) != std::string_view::npos)) {
      ++pos_;
    }
    if (pos_ == start) return false;
    out.kind = Json::Kind::number;
    size_t used = 0;
    out.number = std::stod(std::string(text_.substr(start, pos_ - start)), &used);
    return used == pos_ - start;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Json parse_json(const std::string& text) {
  Json json;
  EXPECT_TRUE(JsonReader(text).read_document(json)) << text;
  return json;
}

// Every tag of an SVG text closed in order; false names no reason, the
// assertion prints the text.
bool tags_balanced(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t pos = svg.find('<'); pos != std::string::npos; pos = svg.find('<', pos + 1)) {
    const size_t end = svg.find('>', pos);
    if (end == std::string::npos) return false;
    const std::string tag = svg.substr(pos + 1, end - pos - 1);
    if (tag.empty()) return false;
    if (tag.back() == '/') continue;  // self-closing
    const std::string name = tag.substr(tag[0] == '/', tag.find_first_of(" \n") - (tag[0] == '/'));
    if (tag[0] != '/') {
      open.push_back(name);
    } else if (open.empty() || open.back() != name) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty();
}

PlanRequest lenet_request() {
  PlanRequest request;
  request.step.model.name = "lenet";
  request.step.model.batch = 64;
  return request;
}

TEST(ParseBytes, AcceptsNumbersAndUnits) {
  EXPECT_EQ(parse_bytes("0").value(), 0u);
  EXPECT_EQ(parse_bytes("4096").value(), 4096u);
  EXPECT_EQ(parse_bytes("12B").value(), 12u);
  EXPECT_EQ(parse_bytes("1KB").value(), 1000u);
  EXPECT_EQ(parse_bytes("3MB").value(), 3'000'000u);
  EXPECT_EQ(parse_bytes("2GB").value(), 2'000'000'000u);
  EXPECT_EQ(parse_bytes("1KiB").value(), 1024u);
  EXPECT_EQ(parse_bytes("2 MiB").value(), 2u << 20);
  EXPECT_EQ(parse_bytes("1.5GiB").value(), 1610612736u);
  EXPECT_EQ(parse_bytes("0.25MB").value(), 250'000u);
  EXPECT_EQ(parse_bytes("0.1KiB").value(), 102u);  // 102.4: the fraction of a byte is dropped
  EXPECT_EQ(parse_bytes("18446744073709551615").value(), std::numeric_limits<size_t>::max());
  EXPECT_EQ(parse_bytes("1.0000000000000000000000001KiB").value(), 1024u);
  EXPECT_EQ(parse_bytes("2TB").value(), 2'000'000'000'000u);
  EXPECT_EQ(parse_bytes("1PB").value(), 1'000'000'000'000'000u);
  EXPECT_EQ(parse_bytes("1.5TiB").value(), size_t{3} << 39);
  EXPECT_EQ(parse_bytes("2PiB").value(), size_t{2} << 50);
  EXPECT_EQ(parse_bytes("12.0B").value(), 12u);  // a whole number of bytes
}

TEST(ParseBytes, RejectsWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"-1", "negative"},
      {"-2GiB", "negative"},
      {"12XB", "unknown unit 'XB'"},
      {"5mib", "unknown unit"},
      {"1 GiB ", "unknown unit"},
      {"1e9", "unknown unit"},
      {"0x10", "unknown unit"},
      {"MiB", "not a number"},
      {".5GiB", "not a number"},
      {"+5", "not a number"},
      {"1.", "no digits after the point"},
      {"1.GiB", "no digits after the point"},
      {"1.5.2", "unknown unit"},
      {"1.5", "a fraction of a byte; give whole bytes or a unit, such as 1.5GiB"},
      {"0.5B", "a fraction of a byte"},
      {"16384PiB", "more bytes than"},
      {"18446744073709551616", "more bytes than"},
      {"17179869184GiB", "more bytes than"},
      {"99999999999999999999999999999999", "more bytes than"},
  };
  for (const auto& [text, reason] : cases) {
    auto bytes = parse_bytes(text);
    ASSERT_FALSE(bytes.is_ok()) << "'" << text << "' gave " << bytes.value();
    EXPECT_NE(bytes.message().find(reason), std::string::npos)
        << "'" << text << "': " << bytes.message();
  }
}

TEST(HumanBytes, PicksTheLargestUnitAtLeastOne) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.00 KiB");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(12303232), "11.73 MiB");
  EXPECT_EQ(human_bytes(size_t{3} << 30), "3.00 GiB");
}

// The numbers of a report agree with each other and with the timeline.
void expect_consistent(const PlanReport& report) {
  EXPECT_GE(report.arena_bytes, report.lower_bound_bytes);
  EXPECT_GE(report.no_sharing_bytes, report.arena_bytes);
  const BytesByRole& r = report.by_role;
  EXPECT_EQ(r.parameters + r.gradients + r.optimizer_state + r.activations + r.workspace,
            report.lower_bound_bytes);
  ASSERT_EQ(report.timeline.size(), report.num_nodes);
  ASSERT_GE(report.peak_step, 0);
  ASSERT_LT(static_cast<size_t>(report.peak_step), report.num_nodes);
  const auto highest =
      std::max_element(report.timeline.begin(), report.timeline.end(),
                       [](const auto& a, const auto& b) { return a.live_bytes < b.live_bytes; });
  EXPECT_EQ(highest->live_bytes, report.lower_bound_bytes);
  EXPECT_EQ(highest->step, report.peak_step);
  for (size_t i = 0; i < report.timeline.size(); ++i) {
    EXPECT_EQ(report.timeline[i].step, static_cast<int32_t>(i));
  }
}

size_t count_phase(const PlanReport& report, Phase phase) {
  return static_cast<size_t>(std::count_if(report.timeline.begin(), report.timeline.end(),
                                           [&](const auto& p) { return p.phase == phase; }));
}

TEST(PlanTrainingStep, IsWhatTrainingAllocates) {
  for (int64_t accumulate : {1, 3}) {
    for (auto kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
      PlanRequest request = lenet_request();
      request.step.accumulate = accumulate;
      request.step.optimizer.kind = kind;
      auto report = plan_training_step(request);
      ASSERT_TRUE(report.is_ok()) << report.message();
      expect_consistent(*report);
      auto program = TrainingProgram::create(request.step, 8);
      ASSERT_TRUE(program.is_ok()) << program.message();
      const MemoryPlan& plan = (*program)->step_executable().plan();
      EXPECT_EQ(report->arena_bytes, plan.arena_bytes);
      EXPECT_EQ(report->lower_bound_bytes, plan.lower_bound_bytes);
      EXPECT_EQ(report->num_nodes, (*program)->step_graph().num_nodes());
    }
  }
}

// oneDNN's workspaces depend on the thread count: the plan at --threads T is
// what training at --threads T allocates.
TEST(PlanTrainingStep, PlansForTheTrainingThreadCount) {
  const ModelOptions model{.name = "resnet18", .batch = 4, .image_size = 32, .classes = 4,
                           .width = 8};
  for (int threads : {1, 2}) {
    PlanRequest request;
    request.step.model = model;
    request.step.threads = threads;
    auto report = plan_training_step(request);
    ASSERT_TRUE(report.is_ok()) << report.message();
    auto program = TrainingProgram::create(request.step, 2);
    ASSERT_TRUE(program.is_ok()) << program.message();
    EXPECT_EQ(report->arena_bytes, (*program)->step_executable().plan().arena_bytes)
        << threads << " threads";
  }
}

// Every model of the zoo, at several batches and both optimizers: the planned
// arena is within 10% of the lower bound, and sharing beats no sharing.
TEST(PlanTrainingStep, ZooArenasAreNearTheLowerBound) {
  for (const std::string& model : model_names()) {
    for (int64_t batch : {1, 64, 256}) {
      for (auto kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
        PlanRequest request = lenet_request();
        request.step.model.name = model;
        request.step.model.batch = batch;
        request.step.optimizer.kind = kind;
        auto report = plan_training_step(request);
        ASSERT_TRUE(report.is_ok()) << report.message();
        EXPECT_LE(static_cast<double>(report->arena_bytes),
                  1.10 * static_cast<double>(report->lower_bound_bytes))
            << model << " batch " << batch;
        EXPECT_LT(report->arena_bytes, report->no_sharing_bytes) << model << " batch " << batch;
      }
    }
  }
}

TEST(PlanTrainingStep, PhasesFollowTheGraphsParts) {
  const Model model = build_model({.name = "lenet", .batch = 64}, true).value();
  std::set<std::string> forward;
  for (const Node& node : model.graph.nodes()) forward.insert(node.name);
  for (int64_t accumulate : {1, 2}) {
    PlanRequest request = lenet_request();
    request.step.accumulate = accumulate;
    request.step.blocked_layouts = false;  // no reorder nodes between the model's
    request.step.fuse = false;             // nor fused ones in their place
    const PlanReport report = plan_training_step(request).value();
    // Forward: the model's own nodes. Update: per parameter, the optimizer
    // node, and with accumulation also the sum and the accumulator's reset.
    EXPECT_EQ(count_phase(report, Phase::forward), model.graph.num_nodes());
    EXPECT_EQ(count_phase(report, Phase::update), model.params.size() * (accumulate == 1 ? 1 : 3));
    EXPECT_GT(count_phase(report, Phase::backward), 0u);
    // The forward nodes are the model's.
    for (const TimelinePoint& point : report.timeline) {
      EXPECT_EQ(point.phase == Phase::forward, forward.count(point.node) == 1) << point.node;
    }
  }
}

TEST(PlanTrainingStep, WithoutSharingEveryBufferHasItsOwnBytes) {
  PlanRequest request = lenet_request();
  const PlanReport shared = plan_training_step(request).value();
  request.step.share = false;
  const PlanReport alone = plan_training_step(request).value();
  expect_consistent(alone);
  EXPECT_EQ(alone.arena_bytes, alone.no_sharing_bytes);
  EXPECT_EQ(alone.no_sharing_bytes, shared.no_sharing_bytes);
  EXPECT_LT(shared.arena_bytes, alone.arena_bytes);
}

TEST(PlanTrainingStep, ABudgetBelowTheArenaIsAnError) {
  PlanRequest request = lenet_request();
  const size_t arena = plan_training_step(request).value().arena_bytes;
  request.step.budget = arena;
  EXPECT_TRUE(plan_training_step(request).is_ok());
  request.step.budget = arena - 1;
  auto over = plan_training_step(request);
  ASSERT_FALSE(over.is_ok());
  // The message names a strategy that fits, and it does; or, when none does,
  // the smallest budget.
  const std::string& message = over.message();
  const size_t named = message.find("; --recompute ");
  if (named == std::string::npos) {
    EXPECT_NE(message.find("give a --budget of at least "), std::string::npos) << message;
    return;
  }
  const size_t begin = named + std::string("; --recompute ").size();
  const std::string strategy = message.substr(begin, message.find(' ', begin) - begin);
  ASSERT_NE(message.find(" fits in ", begin), std::string::npos) << message;
  request.step.recompute = parse_name<Recompute>(strategy).value();
  request.step.mirror = message.compare(begin + strategy.size(), 9, " --mirror") == 0;
  EXPECT_TRUE(plan_training_step(request).is_ok()) << strategy << " does not fit: " << message;
}

TEST(PlanTrainingStep, RejectsBadRequests) {
  PlanRequest request = lenet_request();
  request.step.model.name = "nonexistent";
  EXPECT_FALSE(plan_training_step(request).is_ok());
  request = lenet_request();
  request.step.model.batch = 0;
  EXPECT_FALSE(plan_training_step(request).is_ok());
  request = lenet_request();
  request.step.accumulate = 0;
  EXPECT_FALSE(plan_training_step(request).is_ok());
  // A backend is one of a list: an unknown name does not parse.
  auto bad = parse_name<BackendKind>("tpu");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.message(), "unknown backend 'tpu'; use cpu, reference or cuda");
}

TEST(PlanReportJson, IsOneObjectWithTheReportsNumbers) {
  const PlanRequest request = lenet_request();
  const PlanReport report = plan_training_step(request).value();
  const Json json = parse_json(plan_report_json(request, report));
  ASSERT_EQ(json.kind, Json::Kind::object);
  for (const char* key :
       {"model", "batch", "accumulate", "optimizer", "backend", "sharing", "budget_bytes",
        "arena_bytes", "lower_bound_bytes", "no_sharing_bytes", "fragmentation", "by_role",
        "num_nodes", "peak_step", "algorithm", "recompute", "checkpoint_candidates",
        "checkpoints", "checkpoint_levels", "recomputed_nodes", "timeline"}) {
    EXPECT_EQ(json.fields.count(key), 1u) << key;
  }
  EXPECT_EQ(json.fields.at("model").text, "lenet");
  EXPECT_EQ(json.fields.at("batch").number, 64);
  EXPECT_EQ(json.fields.at("arena_bytes").number, static_cast<double>(report.arena_bytes));
  EXPECT_EQ(json.fields.at("lower_bound_bytes").number,
            static_cast<double>(report.lower_bound_bytes));
  EXPECT_EQ(json.fields.at("no_sharing_bytes").number,
            static_cast<double>(report.no_sharing_bytes));
  EXPECT_EQ(json.fields.at("num_nodes").number, static_cast<double>(report.num_nodes));
  EXPECT_EQ(json.fields.at("algorithm").text, report.algorithm);
  const Json& roles = json.fields.at("by_role");
  ASSERT_EQ(roles.kind, Json::Kind::object);
  EXPECT_EQ(roles.fields.at("parameters").number, static_cast<double>(report.by_role.parameters));
  EXPECT_EQ(roles.fields.at("gradients").number, static_cast<double>(report.by_role.gradients));
  EXPECT_EQ(roles.fields.at("optimizer_state").number,
            static_cast<double>(report.by_role.optimizer_state));
  EXPECT_EQ(roles.fields.at("activations").number, static_cast<double>(report.by_role.activations));
  EXPECT_EQ(roles.fields.at("workspace").number, static_cast<double>(report.by_role.workspace));
  const Json& timeline = json.fields.at("timeline");
  ASSERT_EQ(timeline.items.size(), report.num_nodes);
  for (size_t i = 0; i < report.num_nodes; ++i) {
    const Json& point = timeline.items[i];
    EXPECT_EQ(point.fields.at("step").number, static_cast<double>(i));
    EXPECT_EQ(point.fields.at("node").text, report.timeline[i].node);
    EXPECT_EQ(point.fields.at("phase").text, phase_name(report.timeline[i].phase));
    EXPECT_EQ(point.fields.at("live_bytes").number,
              static_cast<double>(report.timeline[i].live_bytes));
  }
}

TEST(PlanReportJson, EscapesNames) {
  PlanRequest request = lenet_request();
  request.step.model.name = "odd \"model\"\\";
  PlanReport report;
  report.timeline.push_back({0, "tab\there\nnewline", Phase::backward, 64});
  const Json json = parse_json(plan_report_json(request, report));
  EXPECT_EQ(json.fields.at("model").text, request.step.model.name);
  EXPECT_EQ(json.fields.at("timeline").items.at(0).fields.at("node").text, "tab\there\nnewline");
}

TEST(PlanReportText, ShowsHumanUnitsAndExactBytes) {
  const PlanRequest request = lenet_request();
  const PlanReport report = plan_training_step(request).value();
  const std::string text = plan_report_text(request, report);
  for (const std::string& expected :
       {std::string("no sharing"), std::string("planned arena"), std::string("lower bound"),
        std::string("fragmentation"), std::string("heap algorithm"), std::string("workspace"),
        human_bytes(report.arena_bytes), std::to_string(report.arena_bytes) + " bytes",
        std::to_string(report.no_sharing_bytes) + " bytes", report.algorithm}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in\n" << text;
  }
}

TEST(TimelineSvg, IsAWellFormedPlotWithThePhases) {
  const PlanReport report = plan_training_step(lenet_request()).value();
  const std::string svg = timeline_svg(report, "lenet <batch 64> & more");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_TRUE(tags_balanced(svg)) << svg;
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("<polygon"), std::string::npos);
  for (const char* label : {">forward<", ">backward<", ">update<", "planned arena", "lower bound",
                            "lenet &lt;batch 64&gt; &amp; more"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  EXPECT_EQ(svg.find("lenet <batch"), std::string::npos);
}

TEST(TimelineSvg, DrawsAnEmptyReport) {
  const std::string svg = timeline_svg(PlanReport{}, "nothing");
  EXPECT_TRUE(tags_balanced(svg)) << svg;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace memfit
