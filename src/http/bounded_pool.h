#pragma once
// The worker pool behind the HTTP server. httplib's own ThreadPool caps threads but queues accepted
// connections without limit, so a connection flood grows memory and file descriptors until
// accept() fails. This pool caps both: once `max_pending` connections wait for a worker, the accept
// loop blocks and further clients wait in the kernel's listen backlog instead.

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpumeter {

class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t max_pending);
  ~BoundedPool() override;
  BoundedPool(const BoundedPool&) = delete;
  BoundedPool& operator=(const BoundedPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  // Lets queued work finish, then joins the workers. Idempotent.
  void shutdown() override;

 private:
  void work();

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable has_work_;
  std::condition_variable has_room_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpumeter
