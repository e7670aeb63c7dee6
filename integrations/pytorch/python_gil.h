// Blocking without the GIL. The worker thread may need Python's GIL (freeing
// the last reference to a tensor that owns its Python object does), so a
// thread that waits for the worker must not hold it.
#ifndef RINGO_INTEGRATIONS_PYTORCH_PYTHON_GIL_H_
#define RINGO_INTEGRATIONS_PYTORCH_PYTHON_GIL_H_

namespace ringo::pytorch {

// Releases the GIL for the scope if this thread holds it (and the interpreter
// is not shutting down, when other threads can no longer take it anyway).
class WithoutGil {
 public:
  WithoutGil();
  ~WithoutGil();
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  void* state_ = nullptr;  // the PyThreadState saved, if released
};

}  // namespace ringo::pytorch

#endif  // RINGO_INTEGRATIONS_PYTORCH_PYTHON_GIL_H_
