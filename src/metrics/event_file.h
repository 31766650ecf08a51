// EventFileWriter: one TensorBoard event file (TFRecord framing of Event protobufs).
//
// Contract:
// - The constructor creates `dir` (and parents) if needed and a NEW file in it, named
//   events.out.tfevents.<unix seconds>.<host> (".1", ".2", ... appended if that name is taken,
//   so an earlier file is never overwritten or appended to), and writes the file_version event
//   "brain.Event:2". It throws hpctrain::Error naming the path and the cause when the directory
//   or the file cannot be created or written.
// - scalars(), text() and session_start() each append one Event; flush() pushes them to the
//   file. Writes are buffered until flush().
// - A failed write never throws: ok() turns false, error() says what failed, and every later
//   call does nothing. What was flushed before stays a valid file (records are whole or cut at
//   the end, which readers treat as the end).
// - Not thread-safe; protobuf stays inside the .cpp (no protobuf type in this header).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain {

class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One Event holding every (tag, value) as a float scalar (TensorBoard's simple_value).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // A text summary (TensorBoard's text plugin renders it as Markdown).
  void text(int64_t step, const std::string& tag, const std::string& markdown);
  // SessionLog START: readers drop earlier sessions' events with step >= `step`.
  void session_start(int64_t step);
  bool flush();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& serialized_event);
  void fail(const std::string& what);

  std::string path_, error_;
  std::FILE* file_ = nullptr;
};

}  // namespace hpctrain
