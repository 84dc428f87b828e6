//===- Lexer.cpp - TDL tokenizer ------------------------------------------===//
//
// Hand-written scanner for TDL: identifiers, numbers (integers and decimals
// with an optional exponent), double-quoted strings, operators and
// punctuation. Positions are 1-based lines and columns.
//
//===----------------------------------------------------------------------===//
#include "Lexer.h"

#include <cctype>
#include <cstdlib>
#include <string>

using namespace tofu::tdl;

void Lexer::advance() {
  if (pos >= src.size())
    return;
  if (src[pos] == '\n') {
    ++line;
    col = 1;
  } else {
    ++col;
  }
  ++pos;
}

void Lexer::skipSpaceAndComments() {
  while (pos < src.size()) {
    char c = src[pos];
    if (c == '#') {
      while (pos < src.size() && src[pos] != '\n')
        advance();
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      advance();
    } else {
      break;
    }
  }
}

Token Lexer::make(Token::Kind kind, size_t begin, unsigned l, unsigned c) {
  Token t;
  t.kind = kind;
  t.text = src.slice(begin, pos);
  t.loc = Loc{file, l, c};
  t.offset = begin;
  return t;
}

Token Lexer::next() {
  skipSpaceAndComments();
  size_t begin = pos;
  unsigned l = line, c = col;
  if (pos >= src.size())
    return make(Token::Kind::Eof, begin, l, c);
  char ch = src[pos];
  if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')
      advance();
    return make(Token::Kind::Ident, begin, l, c);
  }
  if (std::isdigit(static_cast<unsigned char>(ch)) ||
      (ch == '.' && std::isdigit(static_cast<unsigned char>(peek(1))))) {
    bool isInt = true;
    while (std::isdigit(static_cast<unsigned char>(peek())))
      advance();
    if (peek() == '.') {
      isInt = false;
      advance();
      while (std::isdigit(static_cast<unsigned char>(peek())))
        advance();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (std::isdigit(static_cast<unsigned char>(peek(1))) ||
         ((peek(1) == '-' || peek(1) == '+') &&
          std::isdigit(static_cast<unsigned char>(peek(2)))))) {
      isInt = false;
      advance();
      advance();
      while (std::isdigit(static_cast<unsigned char>(peek())))
        advance();
    }
    Token t = make(Token::Kind::Number, begin, l, c);
    std::string spelled = t.text.str();
    t.number = std::strtod(spelled.c_str(), nullptr);
    t.isInt = isInt;
    return t;
  }
  if (ch == '"') {
    advance();
    size_t contentBegin = pos;
    while (pos < src.size() && src[pos] != '"' && src[pos] != '\n')
      advance();
    if (pos >= src.size() || src[pos] != '"') {
      Token t = make(Token::Kind::Error, begin, l, c);
      t.text = "unterminated string literal";
      return t;
    }
    size_t contentEnd = pos;
    advance();
    Token t = make(Token::Kind::String, begin, l, c);
    t.text = src.slice(contentBegin, contentEnd);
    return t;
  }
  auto two = [&](char second, Token::Kind twoKind, Token::Kind oneKind) {
    advance();
    if (peek() == second) {
      advance();
      return make(twoKind, begin, l, c);
    }
    return make(oneKind, begin, l, c);
  };
  using K = Token::Kind;
  switch (ch) {
  case '.':
    if (peek(1) == '.' && peek(2) == '.') {
      advance();
      advance();
      advance();
      return make(K::Ellipsis, begin, l, c);
    }
    break;
  case '(': advance(); return make(K::LParen, begin, l, c);
  case ')': advance(); return make(K::RParen, begin, l, c);
  case '[': advance(); return make(K::LBracket, begin, l, c);
  case ']': advance(); return make(K::RBracket, begin, l, c);
  case '{': advance(); return make(K::LBrace, begin, l, c);
  case '}': advance(); return make(K::RBrace, begin, l, c);
  case ',': advance(); return make(K::Comma, begin, l, c);
  case ':': advance(); return make(K::Colon, begin, l, c);
  case ';': advance(); return make(K::Semi, begin, l, c);
  case '?': advance(); return make(K::Question, begin, l, c);
  case '*': advance(); return make(K::Star, begin, l, c);
  case '+': advance(); return make(K::Plus, begin, l, c);
  case '/': return two('/', K::SlashSlash, K::Slash);
  case '%': advance(); return make(K::Percent, begin, l, c);
  case '-': return two('>', K::Arrow, K::Minus);
  case '=': return two('=', K::EqEq, K::Assign);
  case '!': return two('=', K::NotEq, K::Bang);
  case '<': return two('=', K::LessEq, K::Less);
  case '>': return two('=', K::GreaterEq, K::Greater);
  case '&':
    if (peek(1) == '&') {
      advance();
      advance();
      return make(K::AndAnd, begin, l, c);
    }
    break;
  case '|':
    if (peek(1) == '|') {
      advance();
      advance();
      return make(K::OrOr, begin, l, c);
    }
    break;
  default:
    break;
  }
  advance();
  Token t = make(K::Error, begin, l, c);
  errorText = "unexpected character '" + std::string(1, ch) + "'";
  t.text = errorText;
  return t;
}
