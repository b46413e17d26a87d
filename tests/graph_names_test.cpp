// A graph's names: its index is built on the first lookup, and a copy starts
// without one, so these check that lookups and new unique names come out the
// same whether the index was built before a copy, after it, or never.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "memfit/ir.h"

namespace memfit {
namespace {

Graph three_inputs() {
  Graph graph;
  for (const char* name : {"x", "x_1", "y"}) {
    graph.add_input(name, TensorType{{2}, DType::f32}, Role::input);
  }
  return graph;
}

TEST(GraphNames, ACopyFindsEveryNameAndGivesNewOnes) {
  const Graph original = three_inputs();
  EXPECT_EQ(original.find_value("x_1").index, 1);  // builds the original's index
  Graph copy = original;
  EXPECT_EQ(copy.find_value("y").index, 2);
  EXPECT_FALSE(copy.find_value("z").valid());
  EXPECT_EQ(copy.unique_value_name("x"), "x_2");
  // Added after the copy: in the copy's names only.
  Value added;
  added.name = copy.unique_value_name("x");
  added.type = TensorType{{2}, DType::f32};
  copy.add_value_raw(added);
  EXPECT_EQ(copy.find_value("x_2").index, 3);
  EXPECT_EQ(copy.unique_value_name("x"), "x_3");
  EXPECT_FALSE(original.find_value("x_2").valid());
  EXPECT_EQ(original.unique_value_name("x"), "x_2");
}

TEST(GraphNames, ValuesAddedBeforeTheFirstLookupAreFound) {
  Graph graph;
  Value first;
  first.name = "a";
  first.type = TensorType{{1}, DType::f32};
  graph.add_value_raw(first);
  graph.add_value_raw(first);  // the same name again: the first one is found
  Node node;
  node.name = "n";
  graph.add_node_raw(node);
  EXPECT_EQ(graph.find_value("a").index, 0);
  EXPECT_EQ(graph.unique_value_name("a"), "a_1");
  EXPECT_EQ(graph.unique_node_name("n"), "n_1");
  EXPECT_EQ(graph.unique_node_name("m"), "m");
}

TEST(GraphNames, AMoveKeepsTheNamesAndAnAssignmentReplacesThem) {
  Graph source = three_inputs();
  EXPECT_TRUE(source.find_value("x").valid());
  Graph moved = std::move(source);
  EXPECT_EQ(moved.find_value("y").index, 2);
  EXPECT_EQ(moved.unique_value_name("x"), "x_2");
  Graph assigned;
  assigned.add_input("old", TensorType{{1}, DType::f32}, Role::input);
  EXPECT_TRUE(assigned.find_value("old").valid());
  assigned = moved;
  EXPECT_FALSE(assigned.find_value("old").valid());
  EXPECT_EQ(assigned.find_value("x_1").index, 1);
  assigned = Graph();
  EXPECT_FALSE(assigned.find_value("x").valid());
  EXPECT_EQ(assigned.num_values(), 0u);
}

}  // namespace
}  // namespace memfit
