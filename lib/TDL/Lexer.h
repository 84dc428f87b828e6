//===- Lexer.h - TDL tokenizer ------------------------------------*- C++ -*-===//
//
// Splits a .tdl source into tokens. `#` starts a comment that runs to the end
// of the line; whitespace (including newlines) separates tokens only.
//
//===----------------------------------------------------------------------===//
#ifndef TOFU_LIB_TDL_LEXER_H
#define TOFU_LIB_TDL_LEXER_H

#include "AST.h"

#include "llvm/ADT/StringRef.h"

namespace tofu::tdl {

struct Token {
  enum class Kind : uint8_t {
    Eof, Error, Ident, Number, String,
    LParen, RParen, LBracket, RBracket, LBrace, RBrace,
    Comma, Colon, Semi, Question, Star, Plus, Minus, Slash, SlashSlash, Percent,
    Assign, EqEq, NotEq, Less, LessEq, Greater, GreaterEq,
    AndAnd, OrOr, Bang, Arrow, Ellipsis,
  };
  Kind kind = Kind::Eof;
  llvm::StringRef text; ///< spelling (for String: the contents, unquoted)
  Loc loc;
  size_t offset = 0;    ///< byte offset of the token in the source
  double number = 0;
  bool isInt = false;
};

/// Produces tokens on demand from one source buffer.
class Lexer {
public:
  Lexer(const std::string *fileName, llvm::StringRef source)
      : file(fileName), src(source) {}
  /// The next token; a Kind::Error token carries its message in `text`.
  Token next();
  llvm::StringRef source() const { return src; }

private:
  Token make(Token::Kind kind, size_t begin, unsigned line, unsigned col);
  void skipSpaceAndComments();
  char peek(size_t ahead = 0) const {
    return pos + ahead < src.size() ? src[pos + ahead] : '\0';
  }
  void advance();

  const std::string *file;
  llvm::StringRef src;
  size_t pos = 0;
  unsigned line = 1, col = 1;
  std::string errorText;
};

} // namespace tofu::tdl

#endif // TOFU_LIB_TDL_LEXER_H
