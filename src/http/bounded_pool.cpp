#include "http/bounded_pool.h"

#include <algorithm>

namespace gpumeter {

BoundedPool::BoundedPool(size_t threads, size_t max_pending)
    : max_pending_(std::max<size_t>(1, max_pending)) {
  threads = std::max<size_t>(1, threads);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

BoundedPool::~BoundedPool() { shutdown(); }

void BoundedPool::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  has_room_.wait(lock, [&] { return jobs_.size() < max_pending_ || stopping_; });
  // After shutdown there is no worker left; run it here so the connection is still answered and closed.
  if (stopping_) {
    lock.unlock();
    fn();
    return;
  }
  jobs_.push_back(std::move(fn));
  has_work_.notify_one();
}

void BoundedPool::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  has_work_.notify_all();
  has_room_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void BoundedPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      has_work_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      if (jobs_.empty()) return;  // stopping, and nothing left to serve
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    has_room_.notify_one();
    fn();
  }
}

}  // namespace gpumeter
