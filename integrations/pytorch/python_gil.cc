#include "integrations/pytorch/python_gil.h"

#include <Python.h>

namespace ringo::pytorch {
namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

}  // namespace

WithoutGil::WithoutGil() {
  if (Py_IsInitialized() && !Finalizing() && PyGILState_Check()) state_ = PyEval_SaveThread();
}

WithoutGil::~WithoutGil() {
  if (state_ != nullptr) PyEval_RestoreThread(static_cast<PyThreadState*>(state_));
}

}  // namespace ringo::pytorch
