// Status and Result: errors a user can cause (bad model, bad file, bad flag)
// travel as values with a message that says what to do. Internal invariants
// are checked with MEMFIT_CHECK (src/core/check.h) instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace memfit {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: must be an error

  bool is_ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return is_ok(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(data_); }
  const std::string& message() const { return std::get<Status>(data_).message(); }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace memfit

#define MEMFIT_CONCAT_INNER(a, b) a##b
#define MEMFIT_CONCAT(a, b) MEMFIT_CONCAT_INNER(a, b)

// Returns the error of a Status-returning expression from the enclosing function.
#define MEMFIT_RETURN_IF_ERROR(expr)                    \
  do {                                                  \
    ::memfit::Status memfit_status_ = (expr);           \
    if (!memfit_status_.is_ok()) return memfit_status_; \
  } while (0)

// `MEMFIT_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its error.
// It expands to several statements: put it in braces after an `if`.
#define MEMFIT_ASSIGN_OR_RETURN(decl, expr) \
  MEMFIT_ASSIGN_OR_RETURN_IMPL(MEMFIT_CONCAT(memfit_result_, __COUNTER__), decl, expr)
#define MEMFIT_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  decl = std::move(tmp).value()
