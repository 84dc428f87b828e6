//===- Parser.cpp - TDL recursive-descent parser ----------------------------===//
//
// Grammar (see docs/TDL.md for the full version):
//
//   file     := (opDecl | gradDecl)*
//   opDecl   := 'op' NAME '(' inputs? ')' ('attrs' '(' attrs? ')')?
//               '->' outputs ('where' constraint (',' constraint)*)?
//               '{' (stmt ';'?)* '}'
//   gradDecl := 'grad' NAME '(' names? ')' '->' names '{' (gstmt ';'?)* '}'
//
// Expression precedence, lowest first: `?:`, `||`, `&&`, comparisons, `+ -`,
// `* /`, unary `- !`, primary. A reducer `sum(v: e, ...) body` takes a
// multiplicative expression as its body, like a big-sigma.
//
//===----------------------------------------------------------------------===//
#include "Parser.h"

#include "Lexer.h"
#include "SpecChecker.h"

#include "llvm/ADT/StringSwitch.h"

#include <atomic>
#include <deque>

using namespace tofu::tdl;
using K = Token::Kind;

namespace {

/// The deepest expression the parser accepts: the nesting of parentheses,
/// `?:` and unary operators, and the height of an operator chain. Far above
/// any spec (the builtin ones stay below 30), far below a stack overflow in
/// the passes that walk expressions recursively. docs/TDL.md.
constexpr unsigned kMaxExprNesting = 256;

class Parser {
public:
  Parser(const std::string *file, llvm::StringRef src) : lexer(file, src) {}

  llvm::Expected<ParsedFile> parseFile();

private:
  // Token stream with arbitrary lookahead.
  const Token &peek(unsigned n = 0) {
    while (buffer.size() <= n)
      buffer.push_back(lexer.next());
    return buffer[n];
  }
  Token consume() {
    Token t = peek();
    buffer.pop_front();
    return t;
  }
  bool consumeIf(K kind) {
    if (peek().kind != kind)
      return false;
    consume();
    return true;
  }
  bool isKeyword(llvm::StringRef kw, unsigned n = 0) {
    return peek(n).kind == K::Ident && peek(n).text == kw;
  }
  /// Records the first error; always returns false / null for chaining.
  bool error(const Loc &loc, const llvm::Twine &msg) {
    if (!failed) {
      failed = true;
      err = makeSpecError(loc, msg);
    }
    return false;
  }
  bool errorAtToken(const llvm::Twine &expected) {
    const Token &t = peek();
    if (t.kind == K::Error)
      return error(t.loc, t.text);
    if (t.kind == K::Eof)
      return error(t.loc, "expected " + expected + ", found end of file");
    return error(t.loc, "expected " + expected + ", found '" + t.text + "'");
  }
  bool expect(K kind, const char *what) {
    if (peek().kind == kind) {
      consume();
      return true;
    }
    return errorAtToken(what);
  }
  bool expectIdent(std::string &out, Loc *loc, const char *what) {
    if (peek().kind != K::Ident)
      return errorAtToken(what);
    Token t = consume();
    out = t.text.str();
    if (loc)
      *loc = t.loc;
    return true;
  }

  std::unique_ptr<OpSpec> parseOp();
  std::unique_ptr<GradRule> parseGrad();
  bool parseInput(InputDecl &in);
  bool parseAttr(AttrDecl &attr);
  bool parseOutput(OpSpec &op, OutputDecl &out);
  bool parseStmt(OpSpec &op);

  ExprPtr parseExpr();
  ExprPtr parseTernary();
  ExprPtr parseBinaryLevel(int level);
  ExprPtr parseUnary();
  ExprPtr parsePrimary();
  ExprPtr parseIndexElement();
  /// Parses `e, e, ...]` (the opening '[' already consumed) into `out`.
  bool parseIndexList(std::vector<ExprPtr> &out);

  /// Expression recursion: parseExpr, parseTernary and parseUnary each
  /// count one level while they run, so that 5,000 nested parentheses, `?:`
  /// or unary minus are an error, not a stack overflow.
  struct NestingGuard {
    Parser &p;
    bool ok;
    explicit NestingGuard(Parser &p) : p(p), ok(++p.nesting <= kMaxExprNesting) {}
    ~NestingGuard() { --p.nesting; }
  };
  bool tooDeep() {
    return error(peek().loc, "expression nested more than " +
                                 llvm::Twine(kMaxExprNesting) +
                                 " levels deep (parentheses, ?: or unary "
                                 "operators); split it with let");
  }

  Lexer lexer;
  std::deque<Token> buffer;
  unsigned nesting = 0;
  bool failed = false;
  llvm::Error err = llvm::Error::success();
};

} // namespace

llvm::Expected<ParsedFile> Parser::parseFile() {
  ParsedFile result;
  while (!failed && peek().kind != K::Eof) {
    if (isKeyword("op")) {
      auto op = parseOp();
      if (!op)
        break;
      if (auto e = checkOpSpec(*op)) {
        llvm::consumeError(std::move(err));
        return std::move(e);
      }
      result.ops.push_back(std::move(op));
    } else if (isKeyword("grad")) {
      auto g = parseGrad();
      if (!g)
        break;
      result.grads.push_back(std::move(g));
    } else {
      errorAtToken("'op' or 'grad'");
    }
  }
  if (failed)
    return std::move(err);
  llvm::consumeError(std::move(err));
  return std::move(result);
}

std::unique_ptr<OpSpec> Parser::parseOp() {
  static std::atomic<uint64_t> nextUid{1};
  auto op = std::make_unique<OpSpec>();
  op->uid = nextUid++;
  consume(); // 'op'
  if (!expectIdent(op->name, &op->loc, "operator name") ||
      !expect(K::LParen, "'('"))
    return nullptr;
  if (peek().kind != K::RParen) {
    do {
      InputDecl in;
      if (!parseInput(in))
        return nullptr;
      op->inputs.push_back(std::move(in));
    } while (consumeIf(K::Comma));
  }
  if (!expect(K::RParen, "',' or ')' after the inputs"))
    return nullptr;
  if (isKeyword("attrs")) {
    consume();
    if (!expect(K::LParen, "'(' after 'attrs'"))
      return nullptr;
    if (peek().kind != K::RParen) {
      do {
        AttrDecl a;
        if (!parseAttr(a))
          return nullptr;
        op->attrs.push_back(std::move(a));
      } while (consumeIf(K::Comma));
    }
    if (!expect(K::RParen, "',' or ')' after the attributes"))
      return nullptr;
  }
  if (!expect(K::Arrow, "'->' before the outputs"))
    return nullptr;
  bool parenthesized = consumeIf(K::LParen);
  do {
    OutputDecl out;
    if (!parseOutput(*op, out))
      return nullptr;
    op->outputs.push_back(std::move(out));
  } while (consumeIf(K::Comma));
  if (parenthesized && !expect(K::RParen, "')' after the outputs"))
    return nullptr;
  if (isKeyword("where")) {
    consume();
    do {
      Constraint c;
      c.loc = peek().loc;
      size_t begin = peek().offset;
      c.cond = parseExpr();
      if (!c.cond)
        return nullptr;
      // The previous token ended the condition: take the text up to the
      // start of the next token, trimmed.
      c.text = lexer.source().slice(begin, peek().offset).rtrim().str();
      if (consumeIf(K::Colon)) {
        if (peek().kind != K::String) {
          errorAtToken("a message string after ':'");
          return nullptr;
        }
        c.message = consume().text.str();
      }
      op->constraints.push_back(std::move(c));
    } while (consumeIf(K::Comma));
  }
  if (!expect(K::LBrace, "'{' to start the body"))
    return nullptr;
  while (peek().kind != K::RBrace) {
    if (peek().kind == K::Eof) {
      errorAtToken("'}' to close the body of '" + op->name + "'");
      return nullptr;
    }
    if (isKeyword("let") && peek(1).kind == K::Ident &&
        peek(2).kind == K::Assign) {
      consume();
      LetDecl let;
      let.loc = peek().loc;
      let.name = consume().text.str();
      consume(); // '='
      let.value = parseExpr();
      if (!let.value)
        return nullptr;
      op->lets.push_back(std::move(let));
      consumeIf(K::Semi);
      continue;
    }
    if (!parseStmt(*op))
      return nullptr;
    consumeIf(K::Semi);
  }
  consume();
  return op;
}

bool Parser::parseInput(InputDecl &in) {
  if (!expectIdent(in.name, &in.loc, "input name"))
    return false;
  in.optional = consumeIf(K::Question);
  if (!expect(K::Colon, "':' and a shape after the input name") ||
      !expect(K::LBracket, "'[' to start the input shape"))
    return false;
  if (peek().kind == K::Star && peek(1).kind == K::RBracket) {
    consume();
    in.unconstrained = true;
  } else if (peek().kind != K::RBracket) {
    do {
      DimDecl d;
      d.loc = peek().loc;
      if (consumeIf(K::Star)) {
        d.kind = DimDecl::Kind::Splat;
        if (!expectIdent(d.name, nullptr, "a shape symbol after '*'"))
          return false;
      } else if (peek().kind == K::Number && peek().isInt) {
        d.kind = DimDecl::Kind::Constant;
        d.value = static_cast<int64_t>(consume().number);
      } else if (!expectIdent(d.name, nullptr, "a shape symbol")) {
        return false;
      }
      in.dims.push_back(std::move(d));
    } while (consumeIf(K::Comma));
  }
  if (!expect(K::RBracket, "',' or ']' in the input shape"))
    return false;
  if (peek().kind == K::Colon) {
    consume();
    if (isKeyword("int")) {
      in.isInt = true;
      in.elem = ElemType::I64;
      in.typeClass = TypeClass::Int;
    } else if (isKeyword("bool")) {
      in.elem = ElemType::Bool;
      in.typeClass = TypeClass::Bool;
    } else if (isKeyword("any")) {
      in.anyElem = true;
      in.typeClass = TypeClass::Any;
    } else if (isKeyword("numeric")) {
      in.typeClass = TypeClass::Numeric;
    } else if (isKeyword("all")) {
      in.typeClass = TypeClass::All;
    } else if (!isKeyword("float")) {
      return errorAtToken(
          "element type 'float', 'numeric', 'all', 'int', 'bool' or 'any'");
    }
    consume();
    if (in.typeClass == TypeClass::Float ||
        in.typeClass == TypeClass::Numeric || in.typeClass == TypeClass::All) {
      if (consumeIf(K::LParen) &&
          (!expectIdent(in.typeVar, nullptr, "a type variable name") ||
           !expect(K::RParen, "')' after the type variable")))
        return false;
    }
    if (isKeyword("const")) {
      if (in.anyElem)
        return errorAtToken("'int const', 'float const' or 'bool const' (a "
                            "constant input has one element type)");
      consume();
      in.isConst = true;
    }
  }
  if (consumeIf(K::Ellipsis))
    in.variadic = true;
  return true;
}

bool Parser::parseAttr(AttrDecl &attr) {
  if (!expectIdent(attr.name, &attr.loc, "attribute name") ||
      !expect(K::Colon, "':' and a type after the attribute name"))
    return false;
  std::string type;
  Loc typeLoc;
  if (!expectIdent(type, &typeLoc, "attribute type"))
    return false;
  if (type == "int")
    attr.kind = AttrValue::Kind::Int;
  else if (type == "float")
    attr.kind = AttrValue::Kind::Float;
  else if (type == "string")
    attr.kind = AttrValue::Kind::String;
  else if (type == "ints")
    attr.kind = AttrValue::Kind::Ints;
  else
    return error(typeLoc, "unknown attribute type '" + type +
                              "' (expected int, float, string or ints)");
  if (!consumeIf(K::Assign))
    return true;
  auto number = [&](double &v, bool &isInt) {
    bool neg = consumeIf(K::Minus);
    if (peek().kind != K::Number)
      return errorAtToken("a number");
    Token t = consume();
    v = neg ? -t.number : t.number;
    isInt = t.isInt;
    return true;
  };
  Loc valueLoc = peek().loc;
  switch (attr.kind) {
  case AttrValue::Kind::Int:
  case AttrValue::Kind::Float: {
    double v = 0;
    bool isInt = false;
    if (!number(v, isInt))
      return false;
    if (attr.kind == AttrValue::Kind::Int && !isInt)
      return error(valueLoc, "default of int attribute '" + attr.name +
                                 "' must be an integer");
    attr.defaultValue = attr.kind == AttrValue::Kind::Int
                            ? AttrValue::ofInt(static_cast<int64_t>(v))
                            : AttrValue::ofFloat(v);
    return true;
  }
  case AttrValue::Kind::String:
    if (peek().kind != K::String)
      return errorAtToken("a string default");
    attr.defaultValue = AttrValue::ofString(consume().text.str());
    return true;
  case AttrValue::Kind::Ints: {
    if (!expect(K::LBracket, "'[' to start an ints default"))
      return false;
    std::vector<int64_t> values;
    if (peek().kind != K::RBracket) {
      do {
        double v = 0;
        bool isInt = false;
        Loc l = peek().loc;
        if (!number(v, isInt))
          return false;
        if (!isInt)
          return error(l, "ints default must contain integers");
        values.push_back(static_cast<int64_t>(v));
      } while (consumeIf(K::Comma));
    }
    if (!expect(K::RBracket, "',' or ']'"))
      return false;
    attr.defaultValue = AttrValue::ofInts(std::move(values));
    return true;
  }
  }
  return true;
}

bool Parser::parseOutput(OpSpec &op, OutputDecl &out) {
  if (!expectIdent(out.name, &out.loc, "output name"))
    return false;
  out.optional = consumeIf(K::Question);
  if (out.optional && peek().kind == K::LBracket)
    return error(peek().loc, "an optional output cannot be variadic");
  if (consumeIf(K::LBracket)) {
    // `outputs[k: count]`: a variadic output.
    if (!expectIdent(out.countVar, nullptr, "an element variable") ||
        !expect(K::Colon, "':' and the number of outputs"))
      return false;
    out.count = parseExpr();
    if (!out.count || !expect(K::RBracket, "']' after the number of outputs"))
      return false;
  }
  if (!expect(K::Colon, "':' and a shape after the output name"))
    return false;
  if (isKeyword("broadcast")) {
    Loc l = consume().loc;
    if (!expect(K::LParen, "'(' after 'broadcast'"))
      return false;
    do {
      std::string name;
      Loc nl;
      if (!expectIdent(name, &nl, "an input name"))
        return false;
      int idx = op.findInput(name);
      if (idx < 0)
        return error(nl, "unknown input '" + name + "' in broadcast()");
      out.broadcastOf.push_back(static_cast<unsigned>(idx));
    } while (consumeIf(K::Comma));
    if (!expect(K::RParen, "')'"))
      return false;
    if (out.broadcastOf.empty())
      return error(l, "broadcast() needs at least one input");
  } else {
    if (!expect(K::LBracket, "'[' or 'broadcast(...)' for the output shape"))
      return false;
    if (peek().kind != K::RBracket) {
      do {
        if (peek().kind == K::Star) {
          Loc l = consume().loc;
          auto e = std::make_unique<Expr>(Expr::Kind::Splat, l);
          if (peek().kind == K::Ident && peek(1).kind != K::LParen &&
              peek(1).kind != K::LBracket) {
            e->name = consume().text.str();
          } else {
            // `*list`: a static list (e.g. `*for(d: n) ...`, `*slice(...)`).
            ExprPtr list = parseUnary();
            if (!list)
              return false;
            e->args.push_back(std::move(list));
          }
          out.dims.push_back(std::move(e));
          continue;
        }
        ExprPtr e = parseExpr();
        if (!e)
          return false;
        out.dims.push_back(std::move(e));
      } while (consumeIf(K::Comma));
    }
    if (!expect(K::RBracket, "',' or ']' in the output shape"))
      return false;
  }
  if (peek().kind == K::Colon &&
      (isKeyword("int", 1) || isKeyword("float", 1) || isKeyword("bool", 1) ||
       isKeyword("numeric", 1) || isKeyword("all", 1))) {
    consume();
    llvm::StringRef type = consume().text;
    out.isInt = type == "int";
    out.elem = type == "int"    ? ElemType::I64
               : type == "bool" ? ElemType::Bool
                                : ElemType::F32;
    out.typeClass = type == "int"       ? TypeClass::Int
                    : type == "bool"    ? TypeClass::Bool
                    : type == "numeric" ? TypeClass::Numeric
                    : type == "all"     ? TypeClass::All
                                        : TypeClass::Float;
    if ((out.typeClass == TypeClass::Float ||
         out.typeClass == TypeClass::Numeric ||
         out.typeClass == TypeClass::All) &&
        consumeIf(K::LParen) &&
        (!expectIdent(out.typeVar, nullptr, "a type variable name") ||
         !expect(K::RParen, "')' after the type variable")))
      return false;
  } else if (peek().kind == K::Colon && isKeyword("dtype", 1)) {
    consume();
    consume();
    if (!expect(K::LParen, "'(' after 'dtype'") ||
        !expectIdent(out.elemAttr, nullptr, "an int attribute name") ||
        !expect(K::RParen, "')' after the attribute name"))
      return false;
  }
  return true;
}

bool Parser::parseStmt(OpSpec &op) {
  BodyStmt s;
  std::string target;
  Loc l;
  if (!expectIdent(target, &l, "a statement 'Output[indices] = expression'"))
    return false;
  s.loc = l;
  int out = op.findOutput(target);
  if (out < 0)
    return error(l, "'" + target + "' is not an output of '" + op.name + "'");
  s.output = static_cast<unsigned>(out);
  if (op.outputs[out].count) {
    if (!expect(K::LBracket, "'[' and an element variable (a variadic "
                             "output is defined as Out[k][indices])") ||
        !expectIdent(s.elementVar, nullptr, "an element variable") ||
        !expect(K::RBracket, "']' after the element variable"))
      return false;
  }
  if (consumeIf(K::LBracket)) {
    if (peek().kind != K::RBracket) {
      do {
        std::string name;
        if (consumeIf(K::Star)) {
          if (!expectIdent(name, nullptr, "an index variable after '*'"))
            return false;
          name = "*" + name;
        } else if (!expectIdent(name, nullptr, "an index variable")) {
          return false;
        }
        s.indices.push_back(std::move(name));
      } while (consumeIf(K::Comma));
    }
    if (!expect(K::RBracket, "',' or ']' after the output indices"))
      return false;
  }
  if (!expect(K::Assign, "'='"))
    return false;
  s.value = parseExpr();
  if (!s.value)
    return false;
  op.body.push_back(std::move(s));
  return true;
}

std::unique_ptr<GradRule> Parser::parseGrad() {
  auto g = std::make_unique<GradRule>();
  consume(); // 'grad'
  if (!expectIdent(g->op, &g->loc, "operator name") ||
      !expect(K::LParen, "'('"))
    return nullptr;
  if (peek().kind != K::RParen) {
    do {
      std::string n;
      if (!expectIdent(n, nullptr, "a forward input name"))
        return nullptr;
      g->inputAliases.push_back(std::move(n));
    } while (consumeIf(K::Comma));
  }
  if (!expect(K::RParen, "',' or ')'") || !expect(K::Arrow, "'->'"))
    return nullptr;
  do {
    std::string n;
    if (!expectIdent(n, nullptr, "a forward output name"))
      return nullptr;
    g->outputAliases.push_back(std::move(n));
  } while (consumeIf(K::Comma));
  if (!expect(K::LBrace, "'{' to start the gradient rule"))
    return nullptr;
  while (peek().kind != K::RBrace) {
    if (peek().kind == K::Eof) {
      errorAtToken("'}' to close the gradient rule of '" + g->op + "'");
      return nullptr;
    }
    std::string target;
    Loc l;
    if (!expectIdent(target, &l, "a statement 'dInput = value'"))
      return nullptr;
    std::string elementVar;
    if (consumeIf(K::LBracket)) {
      // `dX[k] = value`: the gradient of each element of a variadic input.
      if (!expectIdent(elementVar, nullptr, "an element variable") ||
          !expect(K::RBracket, "']' after the element variable"))
        return nullptr;
    }
    if (!expect(K::Assign, "'='"))
      return nullptr;
    // Resolve the target against the input aliases: `d<alias>`.
    int found = -1;
    for (unsigned i = 0; i < g->inputAliases.size(); ++i)
      if (target == "d" + g->inputAliases[i])
        found = static_cast<int>(i);
    if (found < 0) {
      std::string expected;
      for (auto &a : g->inputAliases)
        expected += (expected.empty() ? "d" : ", d") + a;
      error(l, "'" + target + "' is not the gradient of an input of '" +
                   g->op + "' (expected one of: " + expected + ")");
      return nullptr;
    }
    for (auto &s : g->stmts)
      if (s.input == static_cast<unsigned>(found)) {
        error(l, "gradient '" + target + "' is defined twice");
        return nullptr;
      }
    GradStmt s;
    s.input = static_cast<unsigned>(found);
    s.loc = l;
    s.elementVar = std::move(elementVar);
    s.value = parseExpr();
    if (!s.value)
      return nullptr;
    g->stmts.push_back(std::move(s));
    consumeIf(K::Semi);
  }
  consume();
  return g;
}

ExprPtr Parser::parseExpr() {
  NestingGuard guard(*this);
  if (!guard.ok)
    return tooDeep(), nullptr;
  return parseTernary();
}

/// The height of the tree `e` (a leaf is 1), counted up to `limit + 1`
/// without recursion.
static unsigned exprHeight(const Expr &e, unsigned limit) {
  unsigned height = 0;
  std::vector<std::pair<const Expr *, unsigned>> stack{{&e, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    height = std::max(height, depth);
    if (height > limit)
      return height;
    for (const ExprPtr &a : node->args)
      if (a)
        stack.push_back({a.get(), depth + 1});
  }
  return height;
}

ExprPtr Parser::parseTernary() {
  NestingGuard guard(*this);
  if (!guard.ok)
    return tooDeep(), nullptr;
  ExprPtr c = parseBinaryLevel(0);
  if (!c || peek().kind != K::Question)
    return c;
  Loc l = consume().loc;
  ExprPtr a = parseTernary();
  if (!a || !expect(K::Colon, "':' in a conditional expression"))
    return nullptr;
  ExprPtr b = parseTernary();
  if (!b)
    return nullptr;
  auto e = std::make_unique<Expr>(Expr::Kind::Cond, l);
  e->args.push_back(std::move(c));
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

/// Binary operator of `kind` at precedence `level` (0 = `||` ... 4 = `* /`).
static std::optional<BinOp> binOpAt(K kind, int level) {
  switch (level) {
  case 0:
    if (kind == K::OrOr) return BinOp::Or;
    break;
  case 1:
    if (kind == K::AndAnd) return BinOp::And;
    break;
  case 2:
    switch (kind) {
    case K::EqEq: return BinOp::Eq;
    case K::NotEq: return BinOp::Ne;
    case K::Less: return BinOp::Lt;
    case K::LessEq: return BinOp::Le;
    case K::Greater: return BinOp::Gt;
    case K::GreaterEq: return BinOp::Ge;
    default: break;
    }
    break;
  case 3:
    if (kind == K::Plus) return BinOp::Add;
    if (kind == K::Minus) return BinOp::Sub;
    break;
  case 4:
    if (kind == K::Star) return BinOp::Mul;
    if (kind == K::Slash) return BinOp::Div;
    if (kind == K::SlashSlash) return BinOp::FloorDiv;
    if (kind == K::Percent) return BinOp::Mod;
    break;
  }
  return std::nullopt;
}

ExprPtr Parser::parseBinaryLevel(int level) {
  if (level > 4)
    return parseUnary();
  ExprPtr lhs = parseBinaryLevel(level + 1);
  // A chain `a + b + c ...` is parsed in a loop but builds a left-deep tree
  // that every later pass walks recursively: its height is bounded too.
  unsigned height = lhs ? exprHeight(*lhs, kMaxExprNesting) : 0;
  while (lhs) {
    auto op = binOpAt(peek().kind, level);
    if (!op)
      break;
    Loc l = consume().loc;
    ExprPtr rhs = parseBinaryLevel(level + 1);
    if (!rhs)
      return nullptr;
    height = std::max(height, exprHeight(*rhs, kMaxExprNesting)) + 1;
    if (height > kMaxExprNesting) {
      error(l, "expression more than " + llvm::Twine(kMaxExprNesting) +
                   " operators deep (a long chain of binary operators); "
                   "split it with let or a reduction");
      return nullptr;
    }
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, l);
    e->op = *op;
    e->args.push_back(std::move(lhs));
    e->args.push_back(std::move(rhs));
    lhs = std::move(e);
    if (level == 2 && binOpAt(peek().kind, 2)) {
      errorAtToken("parentheses around a chained comparison");
      return nullptr;
    }
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  NestingGuard guard(*this);
  if (!guard.ok)
    return tooDeep(), nullptr;
  if (peek().kind == K::Minus || peek().kind == K::Bang) {
    Token t = consume();
    ExprPtr operand = parseUnary();
    if (!operand)
      return nullptr;
    // Fold `-number` into the literal.
    if (t.kind == K::Minus && operand->kind == Expr::Kind::Number) {
      operand->num = -operand->num;
      operand->loc = t.loc;
      return operand;
    }
    auto e = std::make_unique<Expr>(
        t.kind == K::Minus ? Expr::Kind::Neg : Expr::Kind::Not, t.loc);
    e->args.push_back(std::move(operand));
    return e;
  }
  return parsePrimary();
}

bool Parser::parseIndexList(std::vector<ExprPtr> &out) {
  if (peek().kind != K::RBracket) {
    do {
      ExprPtr idx = parseIndexElement();
      if (!idx)
        return false;
      out.push_back(std::move(idx));
    } while (consumeIf(K::Comma));
  }
  return expect(K::RBracket, "',' or ']' after the indices");
}

ExprPtr Parser::parseIndexElement() {
  if (peek().kind == K::Colon &&
      (peek(1).kind == K::Comma || peek(1).kind == K::RBracket))
    return std::make_unique<Expr>(Expr::Kind::Slice, consume().loc);
  if (peek().kind == K::Star) {
    Loc l = consume().loc;
    auto e = std::make_unique<Expr>(Expr::Kind::Splat, l);
    if (isKeyword("for") && peek(1).kind == K::LParen) {
      ExprPtr list = parsePrimary();
      if (!list)
        return nullptr;
      e->args.push_back(std::move(list));
      return e;
    }
    if (!expectIdent(e->name, nullptr, "an index variable after '*'"))
      return nullptr;
    return e;
  }
  return parseExpr();
}

ExprPtr Parser::parsePrimary() {
  const Token &t = peek();
  switch (t.kind) {
  case K::Number: {
    Token n = consume();
    auto e = std::make_unique<Expr>(Expr::Kind::Number, n.loc);
    e->num = n.number;
    e->isInt = n.isInt;
    return e;
  }
  case K::String: {
    Token s = consume();
    auto e = std::make_unique<Expr>(Expr::Kind::String, s.loc);
    e->name = s.text.str();
    return e;
  }
  case K::LParen: {
    consume();
    ExprPtr e = parseExpr();
    if (!e || !expect(K::RParen, "')'"))
      return nullptr;
    return e;
  }
  case K::Ident:
    break;
  default:
    errorAtToken("an expression");
    return nullptr;
  }
  Token id = consume();
  std::string name = id.text.str();
  if (peek().kind == K::LBracket) {
    consume();
    auto e = std::make_unique<Expr>(Expr::Kind::Access, id.loc);
    e->name = name;
    if (!parseIndexList(e->args))
      return nullptr;
    if (peek().kind == K::LBracket && e->args.size() == 1 &&
        e->args[0]->kind != Expr::Kind::Splat &&
        e->args[0]->kind != Expr::Kind::Slice) {
      // `inputs[k][indices]`: element k of a variadic input.
      consume();
      e->select = std::move(e->args[0]);
      e->args.clear();
      if (!parseIndexList(e->args))
        return nullptr;
    }
    return e;
  }
  if (peek().kind != K::LParen) {
    auto e = std::make_unique<Expr>(Expr::Kind::Ident, id.loc);
    e->name = name;
    return e;
  }
  // A comprehension: `for(v: count [if cond]) body`.
  if (name == "for" && peek(1).kind == K::Ident && peek(2).kind == K::Colon) {
    consume(); // '('
    auto e = std::make_unique<Expr>(Expr::Kind::For, id.loc);
    std::string v = consume().text.str();
    consume(); // ':'
    ExprPtr count = parseExpr();
    if (!count)
      return nullptr;
    e->vars.emplace_back(std::move(v), std::move(count));
    ExprPtr filter;
    if (isKeyword("if")) {
      consume();
      filter = parseExpr();
      if (!filter)
        return nullptr;
    }
    if (!expect(K::RParen, "')' after the comprehension variable"))
      return nullptr;
    ExprPtr body = parseExpr();
    if (!body)
      return nullptr;
    e->args.push_back(std::move(body));
    if (filter)
      e->args.push_back(std::move(filter));
    return e;
  }
  // A reducer: `sum(v: extent, ...) body`.
  std::optional<ReduceKind> red =
      llvm::StringSwitch<std::optional<ReduceKind>>(name)
          .Case("sum", ReduceKind::Sum)
          .Case("max", ReduceKind::Max)
          .Case("min", ReduceKind::Min)
          .Case("prod", ReduceKind::Prod)
          .Default(std::nullopt);
  if (red && ((peek(1).kind == K::Ident && peek(2).kind == K::Colon) ||
              (peek(1).kind == K::Star && peek(2).kind == K::Ident &&
               peek(3).kind == K::Colon))) {
    consume(); // '('
    auto e = std::make_unique<Expr>(Expr::Kind::Reduce, id.loc);
    e->name = name;
    e->reducer = *red;
    do {
      std::string v;
      bool star = consumeIf(K::Star);
      if (!expectIdent(v, nullptr, "a reduction variable") ||
          !expect(K::Colon, "':' and an extent after the reduction variable"))
        return nullptr;
      ExprPtr extent = parseExpr();
      if (!extent)
        return nullptr;
      if (star && extent->kind != Expr::Kind::For) {
        error(extent->loc, "a reduction splat '*" + v +
                               "' needs a comprehension 'for(d: n) extent'");
        return nullptr;
      }
      e->vars.emplace_back(star ? "*" + v : v, std::move(extent));
    } while (consumeIf(K::Comma));
    if (!expect(K::RParen, "',' or ')' after the reduction variables"))
      return nullptr;
    ExprPtr body = parseBinaryLevel(4);
    if (!body)
      return nullptr;
    e->args.push_back(std::move(body));
    return e;
  }
  consume(); // '('
  auto e = std::make_unique<Expr>(Expr::Kind::Call, id.loc);
  e->name = name;
  if (peek().kind != K::RParen) {
    do {
      if (peek().kind == K::Ident && peek(1).kind == K::Assign) {
        std::string argName = consume().text.str();
        consume();
        ExprPtr v = parseExpr();
        if (!v)
          return nullptr;
        e->namedArgs.emplace_back(std::move(argName), std::move(v));
        continue;
      }
      if (!e->namedArgs.empty()) {
        errorAtToken("a named argument 'name=value' (positional arguments "
                     "come first)");
        return nullptr;
      }
      if (peek().kind == K::Star && peek(1).kind == K::Ident) {
        // `*name`: every element of a variadic tensor (gradient rules).
        auto splat = std::make_unique<Expr>(Expr::Kind::Splat, consume().loc);
        splat->name = consume().text.str();
        e->args.push_back(std::move(splat));
        continue;
      }
      ExprPtr a = parseExpr();
      if (!a)
        return nullptr;
      e->args.push_back(std::move(a));
    } while (consumeIf(K::Comma));
  }
  if (!expect(K::RParen, "',' or ')' after the arguments"))
    return nullptr;
  if (name == "opaque") {
    // `opaque(A[b, :, :])[i, j]`: an element of a hidden function's result.
    e->kind = Expr::Kind::Opaque;
    if (!expect(K::LBracket,
                "'[' and the indices of the opaque result after 'opaque(...)'"))
      return nullptr;
    if (!parseIndexList(e->indices))
      return nullptr;
  }
  return e;
}

llvm::Expected<ParsedFile> tofu::tdl::parseTDL(const std::string *fileName,
                                               llvm::StringRef source) {
  Parser p(fileName, source);
  return p.parseFile();
}
