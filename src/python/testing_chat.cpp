// Test hooks of the C++ chat code (akunu._testing).
#include <pybind11/pybind11.h>

namespace py = pybind11;

void register_chat_testing(py::module_& m) { (void)m; }
