//===- ParserTest.cpp - TDL lexer, parser and checker diagnostics ---------===//
#include "TDLTestSupport.h"

using namespace tofu::tdl;
using namespace tofu::tdl::test;

TEST(TDLParser, BuiltinSpecsParse) {
  const SpecLibrary &lib = SpecLibrary::builtin();
  for (const char *op :
       {"Gemm", "MatMul", "Transpose", "Add", "Relu", "ReluGrad", "Scale",
        "BiasGrad", "SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLossGrad",
        "SGDUpdate", "Ones"})
    EXPECT_NE(lib.lookup(op), nullptr) << op;
  for (const char *op : {"Gemm", "MatMul", "Transpose", "Add", "Relu",
                         "SoftmaxCrossEntropyLoss"})
    EXPECT_NE(lib.lookupGrad(op), nullptr) << op;
  auto names = lib.opNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(TDLParser, CommentsAndMultipleDecls) {
  EXPECT_EQ(parseError("# a comment\n"
                       "op F(X: [N]) -> Y: [N] { Y[i] = X[i] } # trailing\n"
                       "op G(X: [*D]) -> Y: [*D] { Y[*i] = exp(X[*i]) }\n"
                       "grad F(X) -> Y { dX = dY }\n"),
            "");
}

TEST(TDLParser, UnknownIdentifier) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N] {\n  Y[i] = X[j]\n}\n"),
            "test.tdl:2:12: error: unknown identifier 'j'");
}

TEST(TDLParser, WrongTensorArity) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N] { Y[i] = X[i, i] }"),
            "test.tdl:1:33: error: wrong number of indices for 'X': "
            "expected 1, found 2");
}

TEST(TDLParser, WrongFunctionArity) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N] { Y[i] = exp(X[i], 1) }"),
            "test.tdl:1:33: error: wrong number of arguments to 'exp': "
            "expected 1, found 2");
}

TEST(TDLParser, NonAffineIndex) {
  std::string e = parseError(
      "op F(A: [N, M]) -> Y: [N, M] {\n  Y[i, j] = A[i * j, j]\n}");
  EXPECT_EQ(e, "test.tdl:2:17: error: non-affine index expression: product "
               "of two intervals (index expressions) is not supported");
}

TEST(TDLParser, DivisionByIndex) {
  EXPECT_NE(parseError("op F(A: [N]) -> Y: [N] { Y[i] = A[4 / i] }")
                .find("division by an index expression"),
            std::string::npos);
}

TEST(TDLParser, ComparisonInIndex) {
  EXPECT_NE(parseError("op F(A: [N]) -> Y: [N] { Y[i] = A[i < 2] }")
                .find("comparison of two intervals"),
            std::string::npos);
}

TEST(TDLParser, DataDependentIndex) {
  EXPECT_EQ(
      parseError("op F(A: [N], L: [N] : int) -> Y: [N] { Y[i] = A[L[i]] }"),
      "");
  EXPECT_NE(parseError("op F(A: [N], L: [N]) -> Y: [N] { Y[i] = A[L[i]] }")
                .find("test.tdl:1:43: error: data-dependent index: tensor 'L' "
                      "must be an 'int' input"),
            std::string::npos);
}

TEST(TDLParser, ModAndFloorDivInIndex) {
  EXPECT_EQ(parseError("op F(A: [N]) -> Y: [N] { Y[i] = A[(i + 1) % N] + "
                       "A[i // 2] + i % 3 + i // 2 }"),
            "");
  EXPECT_NE(parseError("op F(A: [N]) -> Y: [N] { Y[i] = A[3 % i] }")
                .find("'%' by an index expression"),
            std::string::npos);
}

TEST(TDLParser, BadToken) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N] {\n  Y[i] = X[i] $ 2\n}"),
            "test.tdl:2:15: error: unexpected character '$'");
}

TEST(TDLParser, MissingCloseBrace) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N] {\n  Y[i] = X[i]\n"),
            "test.tdl:3:1: error: expected '}' to close the body of 'F', "
            "found end of file");
}

TEST(TDLParser, ConditionOnIndexVariable) {
  EXPECT_NE(parseError("op F(X: [N]) -> Y: [N] { Y[i] = i > 0 ? X[i] : 0 }")
                .find("not on index variable 'i'"),
            std::string::npos);
}

TEST(TDLParser, OutputIndexCount) {
  EXPECT_EQ(parseError("op F(X: [N]) -> Y: [N, N] { Y[i] = X[i] }"),
            "test.tdl:1:29: error: wrong number of indices for output 'Y': "
            "expected 2, found 1");
}

TEST(TDLParser, UnterminatedString) {
  EXPECT_NE(parseError("op F(X: [N]) attrs(s: string = \"abc) -> Y: [N] {}")
                .find("unterminated string literal"),
            std::string::npos);
}

TEST(TDLParser, ReducerShadowing) {
  EXPECT_NE(parseError("op F(X: [N]) -> Y: [N] { Y[i] = sum(i: N) X[i] }")
                .find("reduction variable 'i' has the same name as an index "
                      "variable"),
            std::string::npos);
}

TEST(TDLParser, DuplicateOp) {
  SpecLibrary lib;
  ASSERT_EQ(errorText(lib.addSource(
                "a.tdl", "op F(X: [N]) -> Y: [N] { Y[i] = X[i] }")),
            "");
  EXPECT_EQ(errorText(lib.addSource(
                "b.tdl", "op F(X: [N]) -> Y: [N] { Y[i] = X[i] }")),
            "b.tdl:1:4: error: op 'F' is already defined at a.tdl:1:4");
}

TEST(TDLParser, GradRuleErrors) {
  const char *op = "op F(X: [N]) -> Y: [N] { Y[i] = X[i] }\n";
  EXPECT_EQ(parseError(std::string(op) + "grad F(X) -> Y { dZ = dY }"),
            "test.tdl:2:18: error: 'dZ' is not the gradient of an input of "
            "'F' (expected one of: dX)");
  EXPECT_EQ(parseError(std::string(op) + "grad F(X) -> Y { dX = Nope(dY) }"),
            "test.tdl:2:23: error: unknown op 'Nope' in gradient rule");
  EXPECT_EQ(parseError(std::string(op) + "grad F(X) -> Y { dX = F(dY, X) }"),
            "test.tdl:2:23: error: wrong number of operands to 'F': expected "
            "1, found 2");
  EXPECT_EQ(parseError(std::string(op) + "grad F(X) -> Y { dX = F(q) }"),
            "test.tdl:2:25: error: unknown name 'q' in gradient rule "
            "(expected a forward input, a forward output or d<output>)");
  EXPECT_EQ(parseError(std::string(op) + "grad F(X, Z) -> Y { dX = dY }"),
            "test.tdl:2:6: error: gradient rule of 'F' names 2 inputs, the op "
            "has 1");
  EXPECT_EQ(parseError("grad G(X) -> Y { dX = dY }"),
            "test.tdl:1:6: error: gradient rule for unknown op 'G'");
}

TEST(TDLParser, AttributeDefaultsAndTypes) {
  EXPECT_EQ(parseError("op F(X: [N]) attrs(a: int = 1, b: float = -2.5, "
                       "c: string = \"s\", d: ints = [1, 2]) -> Y: [N] "
                       "{ Y[i] = a * b * X[i] }"),
            "");
  EXPECT_EQ(parseError("op F(X: [N]) attrs(a: int = 1.5) -> Y: [N] "
                       "{ Y[i] = X[i] }"),
            "test.tdl:1:29: error: default of int attribute 'a' must be an "
            "integer");
  EXPECT_EQ(parseError("op F(X: [N]) attrs(a: bool) -> Y: [N] "
                       "{ Y[i] = X[i] }"),
            "test.tdl:1:23: error: unknown attribute type 'bool' (expected "
            "int, float, string or ints)");
}

TEST(TDLParser, FailedSourceLeavesLibraryUnchanged) {
  SpecLibrary lib;
  EXPECT_NE(errorText(lib.addSource(
                "a.tdl", "op F(X: [N]) -> Y: [N] { Y[i] = X[i] }\n"
                         "grad F(X) -> Y { dX = Nope(dY) }")),
            "");
  EXPECT_EQ(lib.lookup("F"), nullptr);
}
