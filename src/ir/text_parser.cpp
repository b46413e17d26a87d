// Reads the text form that text_printer.cpp writes (docs/ir-text.md has the
// grammar). Values and nodes are numbered in line order, so a printed graph
// reads back with the same ids.
//
// The parser builds the graph as written, through Graph::add_value_raw and
// add_node_raw, without shape inference: types are checked by verify_graph, so
// a test can write a graph that is wrong on purpose. It checks what it needs to
// build a well-formed Graph: known ops, dtypes, roles and attributes, numbers
// that fit their fields, arity, names defined once and before they are used
// (except graph inputs, which a node may name before their line).
// Every error names its line. No input can make it crash: the fuzz test in
// tests/ir_text_test.cpp feeds it random mutations of valid texts.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <type_traits>

#include "memfit/ir.h"

namespace memfit {
namespace {

// Every DType and Role, to read them by name; keep in step with memfit/ir.h.
constexpr DType kDTypes[] = {DType::f32, DType::i32};
constexpr Layout kLayouts[] = {Layout::plain, Layout::c8, Layout::c16, Layout::oi8, Layout::oi16};
constexpr Role kRoles[] = {Role::input, Role::label,      Role::parameter, Role::optimizer_state,
                           Role::state, Role::activation, Role::gradient,  Role::temporary};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '/' || c == ':';
}

// Keywords, ops, dtypes, roles and attribute keys.
bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

// The whole of `text` as a number, or nothing (a sign, digits or an exponent
// out of place, or a value out of range for T).
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T number{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return number;
}

template <class T>
std::string bad_number(std::string_view text) {
  std::string_view expected = std::is_same_v<T, float>      ? "a float"
                              : std::is_same_v<T, uint64_t> ? "an unsigned integer"
                                                            : "an integer";
  return "bad number '" + std::string(text) + "' (expected " + std::string(expected) + ")";
}

// `[1,2,3]` or `[]`.
Result<std::vector<int64_t>> parse_int_list(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return Status::error("expected a list like [1,2], got '" + std::string(text) + "'");
  }
  std::string_view rest = trim(text.substr(1, text.size() - 2));
  std::vector<int64_t> list;
  if (rest.empty()) return list;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const std::optional<int64_t> number = parse_number<int64_t>(item);
    if (!number) return Status::error(bad_number<int64_t>(item));
    list.push_back(*number);
    if (comma == std::string_view::npos) return list;
    rest.remove_prefix(comma + 1);
  }
}

// One attribute field from its text; the message says what was expected.
template <class T>
Status parse_field(std::string_view text, T& field) {
  if constexpr (std::is_same_v<T, bool>) {
    if (text != "true" && text != "false") {
      return Status::error("expected true or false, got '" + std::string(text) + "'");
    }
    field = text == "true";
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t> ||
                       std::is_same_v<T, float>) {
    const std::optional<T> number = parse_number<T>(text);
    if (!number) return Status::error(bad_number<T>(text));
    field = *number;
  } else if constexpr (kIsIntArray<T>) {
    MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> list, parse_int_list(text));
    static_assert(std::tuple_size_v<T> == 2 || std::tuple_size_v<T> == 3);
    if (list.size() != field.size()) {
      const char* expected = field.size() == 2 ? "two numbers [a,b]" : "three numbers [a,b,c]";
      return Status::error("expected " + std::string(expected) + ", got '" + std::string(text) +
                           "'");
    }
    std::copy(list.begin(), list.end(), field.begin());
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    MEMFIT_ASSIGN_OR_RETURN(field, parse_int_list(text));
  } else {
    // Fails for every field type (none is void) that reaches this branch.
    static_assert(std::is_void_v<T>, "attribute field type without a text form");
  }
  return Status::ok();
}

Status line_error(int line, std::string_view message) {
  return Status::error("line " + std::to_string(line) + ": " + std::string(message));
}

// Reads the tokens of one line. Blanks separate tokens; `#` starts a comment.
class Cursor {
 public:
  Cursor(std::string_view line, int number) : line_(line), number_(number) {}

  // True at the end of the line or at a comment.
  bool at_end() {
    skip_blanks();
    return pos_ == line_.size() || line_[pos_] == '#';
  }

  bool peek(char c) {
    skip_blanks();
    return pos_ < line_.size() && line_[pos_] == c;
  }

  bool consume(std::string_view token) {
    skip_blanks();
    if (line_.substr(pos_).substr(0, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  Status expect(std::string_view token) {
    if (consume(token)) return Status::ok();
    return error("expected '" + std::string(token) + "' " + found());
  }

  std::string_view word() {
    skip_blanks();
    const size_t start = pos_;
    while (pos_ < line_.size() && is_word_char(line_[pos_])) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // Text up to the next blank, comment or one of `stops`.
  std::string_view token(std::string_view stops) {
    skip_blanks();
    const size_t start = pos_;
    while (pos_ < line_.size() && !is_blank(line_[pos_]) && line_[pos_] != '#' &&
           stops.find(line_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    return line_.substr(start, pos_ - start);
  }

  // Text from `[` to the next `]`, both included.
  Result<std::string_view> bracketed() {
    skip_blanks();
    if (pos_ == line_.size() || line_[pos_] != '[') return error("expected '[' " + found());
    const size_t close = line_.find(']', pos_);
    if (close == std::string_view::npos) return error("missing ']'");
    const std::string_view text = line_.substr(pos_, close + 1 - pos_);
    pos_ = close + 1;
    return text;
  }

  // A bare name, or a quoted one with \" \\ \xHH escapes.
  Result<std::string> name(std::string_view what) {
    skip_blanks();
    return name_here(what);
  }

  // `%name`, with no blank after the `%`.
  Result<std::string> value_ref() {
    skip_blanks();
    if (pos_ == line_.size() || line_[pos_] != '%') {
      return error("expected a value name starting with '%' " + found());
    }
    ++pos_;
    return name_here("a value name after '%'");
  }

  // "but found 'xyz'", for messages.
  std::string found() {
    if (at_end()) return "but the line ends";
    size_t end = pos_;
    while (end < line_.size() && !is_blank(line_[end]) && end - pos_ < 24) ++end;
    return "but found '" + std::string(line_.substr(pos_, end - pos_)) + "'";
  }

  Status error(std::string_view message) const { return line_error(number_, message); }
  int number() const { return number_; }

 private:
  void skip_blanks() {
    while (pos_ < line_.size() && is_blank(line_[pos_])) ++pos_;
  }

  Result<std::string> name_here(std::string_view what) {
    if (pos_ < line_.size() && line_[pos_] == '"') return quoted_name();
    const size_t start = pos_;
    while (pos_ < line_.size() && is_name_char(line_[pos_])) ++pos_;
    if (pos_ == start) return error("expected " + std::string(what) + " " + found());
    return std::string(line_.substr(start, pos_ - start));
  }

  Result<std::string> quoted_name() {
    std::string name;
    for (++pos_; pos_ < line_.size();) {
      const char c = line_[pos_++];
      if (c == '"') return name;
      if (c != '\\') {
        name += c;
      } else if (pos_ < line_.size() && (line_[pos_] == '"' || line_[pos_] == '\\')) {
        name += line_[pos_++];
      } else if (pos_ + 2 < line_.size() && line_[pos_] == 'x' && hex_digit(line_[pos_ + 1]) >= 0 &&
                 hex_digit(line_[pos_ + 2]) >= 0) {
        name += static_cast<char>(hex_digit(line_[pos_ + 1]) * 16 + hex_digit(line_[pos_ + 2]));
        pos_ += 3;
      } else {
        return error("bad escape in a quoted name (use \\\", \\\\ or \\xHH)");
      }
    }
    return error("a quoted name misses its closing '\"'");
  }

  std::string_view line_;
  int number_;
  size_t pos_ = 0;
};

// The next word as one of `all`, by the names `name_of` gives them.
template <class Enum, size_t N>
Result<Enum> from_name(Cursor& cursor, const Enum (&all)[N], std::string_view (*name_of)(Enum),
                       std::string_view noun) {
  const std::string_view word = cursor.word();
  std::string known;
  for (Enum candidate : all) {
    if (name_of(candidate) == word) return candidate;
    known += (known.empty() ? "" : ", ") + std::string(name_of(candidate));
  }
  const std::string problem = word.empty()
                                  ? "expected a " + std::string(noun)
                                  : "unknown " + std::string(noun) + " '" + std::string(word) + "'";
  return cursor.error(problem + " (known: " + known + ")");
}

// "1 input", "2 to 3 inputs", "at least 1 input".
std::string arity_text(Arity arity) {
  std::string text = std::to_string(arity.min);
  if (arity.max < 0) text = "at least " + text;
  if (arity.max > arity.min) text += " to " + std::to_string(arity.max);
  const int last = std::max(arity.min, arity.max);
  return text + (last == 1 ? " input" : " inputs");
}

class GraphParser {
 public:
  Result<Graph> parse(std::string_view text) {
    bool seen_header = false;
    int number = 0;
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      start = end + 1;
      Cursor cursor(line, ++number);
      if (cursor.at_end()) continue;
      MEMFIT_RETURN_IF_ERROR(seen_header ? statement(cursor) : header(cursor));
      seen_header = true;
      if (!cursor.at_end()) return cursor.error("unexpected text " + cursor.found());
    }
    if (!seen_header) return Status::error("empty text: a graph starts with 'memfit-graph 1'");
    MEMFIT_RETURN_IF_ERROR(resolve_forward_references());
    return std::move(graph_);
  }

 private:
  Status header(Cursor& cursor) {
    if (cursor.token("") != "memfit-graph") {
      return cursor.error("expected the header 'memfit-graph 1' (is this a memfit graph?)");
    }
    const std::string_view version = cursor.token("");
    if (version != "1") {
      return cursor.error("unsupported version '" + std::string(version) +
                          "' (this memfit reads version 1)");
    }
    return Status::ok();
  }

  Status statement(Cursor& cursor) {
    const std::string_view keyword = cursor.word();
    if (keyword == "input") return input(cursor);
    if (keyword == "node") return node(cursor);
    if (keyword == "output") return output(cursor);
    if (keyword == "update") return update(cursor);
    if (keyword.empty()) {
      return cursor.error("expected input, node, output or update " + cursor.found());
    }
    return cursor.error("unknown statement '" + std::string(keyword) +
                        "' (expected input, node, output or update)");
  }

  // input %name type role
  Status input(Cursor& cursor) {
    MEMFIT_ASSIGN_OR_RETURN(Value value, definition(cursor));
    return define(cursor, std::move(value)).status();
  }

  // node name = op(%a, %b) {key=value ...} -> %out type role, ...
  Status node(Cursor& cursor) {
    Node node;
    MEMFIT_ASSIGN_OR_RETURN(node.name, cursor.name("a node name"));
    const auto [it, inserted] = node_lines_.emplace(node.name, cursor.number());
    if (!inserted) {
      return cursor.error("node '" + node.name + "' is already defined on line " +
                          std::to_string(it->second));
    }
    MEMFIT_RETURN_IF_ERROR(cursor.expect("="));
    const std::string_view op = cursor.word();
    if (op.empty()) {
      return cursor.error("node '" + node.name + "': expected an op " + cursor.found());
    }
    const Result<OpKind> kind = op_from_name(op);
    if (!kind) return cursor.error("node '" + node.name + "': " + kind.message());
    node.op = *kind;
    const std::string where = "node '" + node.name + "' (" + std::string(op) + ")";

    MEMFIT_RETURN_IF_ERROR(cursor.expect("("));
    while (!cursor.consume(")")) {
      if (!node.inputs.empty()) MEMFIT_RETURN_IF_ERROR(cursor.expect(","));
      MEMFIT_ASSIGN_OR_RETURN(const std::string name, cursor.value_ref());
      const ValueId id = graph_.find_value(name);
      if (!id.valid()) {
        forward_.push_back({name, cursor.number(), where,
                            NodeId(static_cast<int32_t>(graph_.num_nodes())), node.inputs.size()});
      }
      node.inputs.push_back(id);
    }
    const Arity arity = op_arity(node.op);
    const int inputs = static_cast<int>(node.inputs.size());
    if (!arity.admits(inputs)) {
      return cursor.error(where + " takes " + arity_text(arity) + ", got " +
                          std::to_string(inputs));
    }

    node.attrs = default_attrs(node.op);
    if (cursor.peek('{')) MEMFIT_RETURN_IF_ERROR(attributes(cursor, where, node.attrs));

    MEMFIT_RETURN_IF_ERROR(cursor.expect("->"));
    const NodeId id(static_cast<int32_t>(graph_.num_nodes()));
    while (!cursor.at_end()) {
      if (!node.outputs.empty()) MEMFIT_RETURN_IF_ERROR(cursor.expect(","));
      MEMFIT_ASSIGN_OR_RETURN(Value value, definition(cursor));
      value.producer = id;
      value.output_index = static_cast<int>(node.outputs.size());
      MEMFIT_ASSIGN_OR_RETURN(const ValueId output, define(cursor, std::move(value)));
      node.outputs.push_back(output);
    }
    graph_.add_node_raw(std::move(node));
    return Status::ok();
  }

  // {key=value ...}: every field the text names is parsed by the type it has
  // in the op's attribute struct; the others keep their defaults.
  Status attributes(Cursor& cursor, const std::string& where, Attrs& attrs) {
    struct Given {
      std::string_view key;
      std::string_view text;
      bool used = false;
    };
    std::vector<Given> given;
    MEMFIT_RETURN_IF_ERROR(cursor.expect("{"));
    while (!cursor.consume("}")) {
      if (cursor.at_end()) return cursor.error(where + ": missing '}' after the attributes");
      const std::string_view key = cursor.word();
      if (key.empty()) {
        return cursor.error(where + ": expected an attribute name " + cursor.found());
      }
      const std::string quoted_key = "attribute '" + std::string(key) + "'";
      for (const Given& other : given) {
        if (other.key == key) return cursor.error(where + ": " + quoted_key + " is given twice");
      }
      MEMFIT_RETURN_IF_ERROR(cursor.expect("="));
      if (cursor.at_end() || cursor.peek('}')) {
        return cursor.error(where + ": " + quoted_key + " has no value");
      }
      std::string_view text;
      if (cursor.peek('[')) {
        MEMFIT_ASSIGN_OR_RETURN(text, cursor.bracketed());
      } else {
        text = cursor.token("}");
      }
      given.push_back({key, text});
    }

    Status status;
    std::string known;
    std::visit(
        [&](auto& alternative) {
          alternative.visit_fields([&](std::string_view key, auto& field) {
            known += (known.empty() ? "" : ", ") + std::string(key);
            for (Given& entry : given) {
              if (entry.key != key || !status) continue;
              entry.used = true;
              status = parse_field(entry.text, field);
              if (!status) {
                status = cursor.error(where + ": attribute '" + std::string(key) +
                                      "': " + status.message());
              }
            }
          });
        },
        attrs);
    MEMFIT_RETURN_IF_ERROR(status);
    for (const Given& entry : given) {
      if (entry.used) continue;
      return cursor.error(where + ": unknown attribute '" + std::string(entry.key) + "' (" +
                          (known.empty() ? "the op has no attributes" : "known: " + known) + ")");
    }
    return Status::ok();
  }

  // output %name
  Status output(Cursor& cursor) {
    MEMFIT_ASSIGN_OR_RETURN(const ValueId id, use(cursor, "output"));
    graph_.mark_output(id);
    return Status::ok();
  }

  // update %state <- %next
  Status update(Cursor& cursor) {
    MEMFIT_ASSIGN_OR_RETURN(const ValueId state, use(cursor, "update"));
    MEMFIT_RETURN_IF_ERROR(cursor.expect("<-"));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId next, use(cursor, "update"));
    graph_.add_update(state, next);
    return Status::ok();
  }

  Result<ValueId> use(Cursor& cursor, std::string_view statement) {
    MEMFIT_ASSIGN_OR_RETURN(const std::string name, cursor.value_ref());
    const ValueId id = graph_.find_value(name);
    if (!id.valid()) {
      return cursor.error(std::string(statement) + ": value %" + name +
                          " is used before it is defined");
    }
    return id;
  }

  // %name type[@layout] role
  Result<Value> definition(Cursor& cursor) {
    Value value;
    MEMFIT_ASSIGN_OR_RETURN(value.name, cursor.value_ref());
    MEMFIT_ASSIGN_OR_RETURN(value.type.dtype, from_name(cursor, kDTypes, dtype_name, "dtype"));
    MEMFIT_ASSIGN_OR_RETURN(const std::string_view dims, cursor.bracketed());
    Result<Shape> shape = parse_int_list(dims);
    if (!shape) return cursor.error("bad shape of %" + value.name + ": " + shape.message());
    value.type.shape = std::move(*shape);
    if (cursor.consume("@")) {
      MEMFIT_ASSIGN_OR_RETURN(value.layout, from_name(cursor, kLayouts, layout_name, "layout"));
    }
    MEMFIT_ASSIGN_OR_RETURN(value.role, from_name(cursor, kRoles, role_name, "role"));
    return value;
  }

  // Adds a value after checking that its name is new.
  Result<ValueId> define(Cursor& cursor, Value value) {
    const auto [it, inserted] = value_lines_.emplace(value.name, cursor.number());
    if (!inserted) {
      return cursor.error("value %" + value.name + " is already defined on line " +
                          std::to_string(it->second));
    }
    return graph_.add_value_raw(std::move(value));
  }

  // A node input named before its definition: allowed for graph inputs, whose
  // place among the lines follows their id (see text_printer.cpp).
  struct ForwardReference {
    std::string name;
    int line = 0;
    std::string where;
    NodeId node;
    size_t input = 0;
  };

  Status resolve_forward_references() {
    for (const ForwardReference& ref : forward_) {
      const ValueId id = graph_.find_value(ref.name);
      if (!id.valid()) {
        return line_error(ref.line, ref.where + ": value %" + ref.name + " is not defined");
      }
      if (graph_.value(id).producer.valid()) {
        return line_error(ref.line, ref.where + ": value %" + ref.name +
                                        " is used before it is defined (on line " +
                                        std::to_string(value_lines_.at(ref.name)) + ")");
      }
      graph_.node(ref.node).inputs[ref.input] = id;
    }
    return Status::ok();
  }

  Graph graph_;
  std::vector<ForwardReference> forward_;
  // The line where each name is defined, for messages.
  std::unordered_map<std::string, int> value_lines_;
  std::unordered_map<std::string, int> node_lines_;
};

}  // namespace

Result<Graph> parse_graph(std::string_view text) { return GraphParser().parse(text); }

}  // namespace memfit
