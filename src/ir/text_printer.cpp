// The text form of a graph (docs/ir-text.md has the grammar). One line per
// graph input, node, graph output and state update:
//
//   memfit-graph 1
//   input %x f32[8,4] input
//   input %w f32[3,4] parameter
//   input %dw f32[3,4] gradient
//   node fc = linear(%x, %w) -> %fc f32[8,3] activation
//   node drop = dropout(%fc) {p=0.1 key=7} -> %drop f32[8,3] activation
//   (a value in a blocked layout: f32[8,20,24,24]@c8)
//   node sgd = sgd_update(%w, %dw) {lr=0.01 momentum=0 weight_decay=0} -> %w2 f32[3,4] parameter
//   output %drop
//   update %w <- %w2
//
// The parser numbers values and nodes in line order, so the printer emits the
// lines in id order: a graph input is printed where its id falls between the
// outputs of the nodes (a node may name an input printed after it). This
// rebuilds the same ValueIds and NodeIds whenever each node's outputs are
// consecutive values created after those of the nodes before it, as
// Graph::add_node makes them; any other graph reads back with its values
// renumbered. Every attribute field is printed (through visit_fields), floats
// in the shortest form that reads back to the same bits. Names made of
// letters, digits and `._-/:` are printed bare, any other name in double
// quotes with escapes.
#include <algorithm>
#include <charconv>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "memfit/ir.h"

namespace memfit {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '/' || c == ':';
}

void append_name(std::string& out, std::string_view name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), is_name_char)) {
    out += name;
    return;
  }
  constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      // Keeps every line free of raw newlines and the file plain ASCII.
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

template <class T>
void append_number(std::string& out, T number) {
  char buffer[64];
  // For floats, to_chars without a precision gives the shortest text that
  // from_chars reads back to the same bits.
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), number);
  MEMFIT_CHECK(error == std::errc());
  out.append(buffer, end);
}

void append_ints(std::string& out, const int64_t* begin, const int64_t* end) {
  out += '[';
  for (const int64_t* it = begin; it != end; ++it) {
    if (it != begin) out += ',';
    append_number(out, *it);
  }
  out += ']';
}

template <class T>
void append_field(std::string& out, const T& field) {
  if constexpr (std::is_same_v<T, bool>) {
    out += field ? "true" : "false";
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t> ||
                       std::is_same_v<T, float>) {
    append_number(out, field);
  } else if constexpr (kIsIntArray<T> || std::is_same_v<T, std::vector<int64_t>>) {
    append_ints(out, field.data(), field.data() + field.size());
  } else {
    // Fails for every field type (none is void) that reaches this branch.
    static_assert(std::is_void_v<T>, "attribute field type without a text form");
  }
}

void append_attrs(std::string& out, const Attrs& attrs) {
  // visit_fields is not const: it also serves the parser, which fills fields.
  Attrs copy = attrs;
  std::string fields;
  std::visit(
      [&](auto& alternative) {
        alternative.visit_fields([&](std::string_view key, const auto& field) {
          if (!fields.empty()) fields += ' ';
          fields += key;
          fields += '=';
          append_field(fields, field);
        });
      },
      copy);
  if (fields.empty()) return;
  out += " {";
  out += fields;
  out += '}';
}

class Printer {
 public:
  explicit Printer(const Graph& graph) : graph_(graph) {}

  std::string print() {
    out_ = "memfit-graph 1\n";
    for (const Node& node : graph_.nodes()) {
      size_t first_output = graph_.num_values();
      for (ValueId id : node.outputs) {
        if (in_range(id)) first_output = std::min(first_output, id.idx());
      }
      if (!node.outputs.empty()) print_inputs_before(first_output);
      print_node(node);
    }
    print_inputs_before(graph_.num_values());
    for (ValueId id : graph_.outputs()) {
      out_ += "output ";
      append_ref(id);
      out_ += '\n';
    }
    for (const StateUpdate& update : graph_.updates()) {
      out_ += "update ";
      append_ref(update.state);
      out_ += " <- ";
      append_ref(update.next);
      out_ += '\n';
    }
    return std::move(out_);
  }

 private:
  bool in_range(ValueId id) const { return id.valid() && id.idx() < graph_.num_values(); }

  void print_inputs_before(size_t end) {
    for (; next_input_ < end; ++next_input_) {
      const ValueId id(static_cast<int32_t>(next_input_));
      if (graph_.value(id).producer.valid()) continue;
      out_ += "input ";
      append_definition(id);
      out_ += '\n';
    }
  }

  void print_node(const Node& node) {
    out_ += "node ";
    append_name(out_, node.name);
    out_ += " = ";
    out_ += op_name(node.op);
    out_ += '(';
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i) out_ += ", ";
      append_ref(node.inputs[i]);
    }
    out_ += ')';
    append_attrs(out_, node.attrs);
    out_ += " ->";
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      out_ += i ? ", " : " ";
      if (in_range(node.outputs[i])) {
        append_definition(node.outputs[i]);
      } else {
        append_ref(node.outputs[i]);
      }
    }
    out_ += '\n';
  }

  // `%name type role`
  void append_definition(ValueId id) {
    const Value& value = graph_.value(id);
    append_ref(id);
    out_ += ' ';
    out_ += dtype_name(value.type.dtype);
    append_ints(out_, value.type.shape.data(), value.type.shape.data() + value.type.shape.size());
    if (value.layout != Layout::plain) {
      out_ += '@';
      out_ += layout_name(value.layout);
    }
    out_ += ' ';
    out_ += role_name(value.role);
  }

  // A broken id still prints (the text of a graph the verifier rejects is what
  // a bug report needs), as a reference the parser refuses.
  void append_ref(ValueId id) {
    out_ += '%';
    if (in_range(id)) {
      append_name(out_, graph_.value(id).name);
    } else {
      out_ += "<bad value id ";
      append_number(out_, id.index);
      out_ += '>';
    }
  }

  const Graph& graph_;
  size_t next_input_ = 0;  // graph inputs below this id are printed
  std::string out_;
};

}  // namespace

std::string quoted_name(std::string_view name) {
  std::string out;
  append_name(out, name);
  return out;
}

std::string print_graph(const Graph& graph) { return Printer(graph).print(); }

}  // namespace memfit
