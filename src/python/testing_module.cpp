// akunu._testing: what the tests reach below the public API, in its own
// extension so that akunu._core stays the product's binding (a wheel built
// with AKUNU_TESTING=OFF has no akunu._testing, and akunu works without it).
// This file is the one Python binding that knows the backends: it runs single
// kernels by name, looks into the Metal backend's launch plans and chip
// tuning, and exports the layout of every parameter struct of
// core/kernel_params.h, by which the tests pack kernel parameters.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <type_traits>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/device_factory.h"
#include "core/dispatch_table.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_topology.h"
#include "metal/emulation/emulated_metal_device.h"
#include "metal/metal_launch.h"
#include "py_convert.h"

using namespace akunu;

namespace {

// A field's struct-module format: "I" (uint32_t), "i" (int32_t), "f" (float),
// with a count for arrays ("3I").
template <typename M>
std::string field_format() {
    using E = std::remove_all_extents_t<M>;
    static_assert(std::is_same<E, uint32_t>::value || std::is_same<E, int32_t>::value || std::is_same<E, float>::value,
                  "kernel parameter fields are 4-byte uint32_t, int32_t or float");
    const char* c = std::is_same<E, float>::value ? "f" : std::is_same<E, uint32_t>::value ? "I" : "i";
    const size_t n = sizeof(M) / sizeof(E);
    return n == 1 ? std::string(c) : std::to_string(n) + c;
}

// {struct: {"size": sizeof, "fields": {field: offsetof}, "formats": {field: format}}},
// fields in declaration order, for every struct of kernel_params.h:
// param_layouts.inc lists them, written from the header at build time by
// param_layouts.py (tests/test_kernel_params_layout.py reads the header on its
// own and fails on any struct or field missing here).
py::dict param_layouts() {
    py::dict out, fields, formats;
#define AK_FIELD(S, f)                      \
    fields[#f] = offsetof(S, f);            \
    formats[#f] = field_format<decltype(S::f)>();
#define AK_STRUCT(S)                        \
    {                                       \
        py::dict d;                         \
        d["size"] = sizeof(S);              \
        d["fields"] = fields;               \
        d["formats"] = formats;             \
        out[#S] = d;                        \
        fields = py::dict();                \
        formats = py::dict();               \
    }
#define AK_ENUM_VALUE(E, v)
#include "param_layouts.inc"
#undef AK_FIELD
#undef AK_STRUCT
#undef AK_ENUM_VALUE
    return out;
}

// The enums of kernel_params.h: {enum: {name: value}}.
py::dict param_enums() {
    py::dict out;
#define AK_FIELD(S, f)
#define AK_STRUCT(S)
#define AK_ENUM_VALUE(E, v)                                              \
    if (!out.contains(#E)) out[#E] = py::dict();                         \
    out[#E].cast<py::dict>()[#v] = (uint64_t)(v);
#include "param_layouts.inc"
#undef AK_FIELD
#undef AK_STRUCT
#undef AK_ENUM_VALUE
    return out;
}

// One kernel by name on numpy buffers, on any device: host-memory devices
// ("cpu", "metal-emu") use the arrays in place, GPU devices get copies in and
// every buffer copied back.
// The device run_kernel / run_table use: made once per name (and, for GPU
// devices, per AKUNU_CUDA_TUNING value, as a model load would read it); a
// device no longer there (metal-emu without its library) is an error again.
Device* testing_device(const std::string& device, int n_threads) {
    static std::unique_ptr<CpuDevice> cpu;
    static std::map<std::string, std::unique_ptr<Device>> others;
    if (device == "cpu") {
        if (!cpu || cpu->n_threads() != n_threads) cpu = std::make_unique<CpuDevice>(n_threads);
        return cpu.get();
    }
    const char* tuning = std::getenv("AKUNU_CUDA_TUNING");
    const std::vector<std::string> names = device_names();
    std::unique_ptr<Device>& d = others[device + "|" + (tuning ? tuning : "")];
    if (!d || std::find(names.begin(), names.end(), device) == names.end()) d = create_device(device, n_threads);
    return d.get();
}

// numpy buffers as device buffers: host-memory devices ("cpu", "metal-emu")
// use the arrays in place, GPU devices get copies in.
void bind_buffers(Device* dev, bool host, py::list buffers, std::vector<py::buffer_info>* infos,
                  std::vector<Buffer>* bufs) {
    for (size_t i = 0; i < buffers.size(); i++) {
        py::array a = py::reinterpret_borrow<py::array>(buffers[i]);
        if (!(a.flags() & py::array::c_style)) throw Error("buffer " + std::to_string(i) + " is not C-contiguous");
        infos->push_back(a.request(true));
        const size_t bytes = (size_t)infos->back().size * infos->back().itemsize;
        if (host) {
            bufs->push_back(Buffer{nullptr, bytes, infos->back().ptr});
        } else {
            bufs->push_back(dev->allocate(bytes));
            dev->write_buffer(bufs->back(), infos->back().ptr, bytes);
        }
    }
}

// GPU devices: every buffer copied back, then freed.
void read_back(Device* dev, bool host, const std::vector<py::buffer_info>& infos, const std::vector<Buffer>& bufs) {
    if (host) return;
    for (size_t i = 0; i < bufs.size(); i++) {
        dev->read_buffer(infos[i].ptr, bufs[i], bufs[i].size);
        dev->free_buffer(bufs[i]);
    }
}

// One kernel by name on numpy buffers, on any device (bind_buffers, read_back).
void run_kernel(const std::string& name, py::list buffers, py::bytes params, int n_threads,
                const std::string& device, int batch_rows) {
    Device* dev = testing_device(device, n_threads);
    if (batch_rows > 0) dev->set_batch_rows(batch_rows);  // as a batch engine of that many sequences would
    const bool host = dynamic_cast<CpuDevice*>(dev) != nullptr;
    std::string pb = params;
    if (pb.size() > (size_t)DispatchCmd::MAX_PARAM_BYTES)
        throw Error("params larger than " + std::to_string(DispatchCmd::MAX_PARAM_BYTES) + " bytes");
    if (buffers.size() > (size_t)DispatchCmd::MAX_BUFFERS)
        throw Error("more than " + std::to_string(DispatchCmd::MAX_BUFFERS) + " buffers");
    Pipeline pso = dev->get_pipeline(name);
    std::vector<py::buffer_info> infos;
    std::vector<Buffer> bufs;
    bind_buffers(dev, host, buffers, &infos, &bufs);
    py::gil_scoped_release r;
    dev->begin_encoding();
    dev->set_pipeline(pso);
    for (int i = 0; i < DispatchCmd::MAX_BUFFERS; i++) dev->set_buffer(i < (int)bufs.size() ? bufs[i] : Buffer{}, 0, i);
    dev->set_bytes(pb.data(), (int)pb.size(), (int)buffers.size());
    dev->dispatch(Dim3(), Dim3());
    read_back(dev, host, infos, bufs);
}

// A table of kernels by name over one set of numpy buffers, replayed once
// as a model's table is (so a backend may join commands: CUDA's absorbs and
// Q8Links): commands are (name, buffer indices, params). Returns the
// launcher calls the device made for it (Device::command_launches; 0 where
// the device does not count them).
uint64_t run_table(py::list commands, py::list buffers, const std::string& device, int n_threads) {
    Device* dev = testing_device(device, n_threads);
    const bool host = dynamic_cast<CpuDevice*>(dev) != nullptr;
    std::vector<py::buffer_info> infos;
    std::vector<Buffer> bufs;
    bind_buffers(dev, host, buffers, &infos, &bufs);
    DispatchTable table;
    for (const py::handle& c : commands) {
        const py::tuple t = py::reinterpret_borrow<py::tuple>(c);
        const std::string name = t[0].cast<std::string>(), pb = t[2].cast<std::string>();
        const std::vector<int> idx = t[1].cast<std::vector<int>>();
        if (idx.size() > (size_t)DispatchCmd::MAX_BUFFERS || pb.size() > (size_t)DispatchCmd::MAX_PARAM_BYTES)
            throw Error(name + ": too many buffers or parameter bytes");
        DispatchCmd cmd;
        cmd.pso = dev->get_pipeline(name);
        for (size_t i = 0; i < idx.size(); i++) {
            if (idx[i] < 0 || (size_t)idx[i] >= bufs.size()) throw Error(name + ": no buffer " + std::to_string(idx[i]));
            cmd.buffers[i] = bufs[(size_t)idx[i]];
        }
        cmd.buffer_count = (int)idx.size();
        std::memcpy(cmd.param_bytes, pb.data(), pb.size());
        cmd.param_size = (int)pb.size();
        cmd.param_index = cmd.buffer_count;
        table.commands.push_back(cmd);
        table.labels.push_back(name);
    }
    py::gil_scoped_release r;
    const uint64_t before = dev->command_launches();
    dev->encode_dispatch_table(table, ReplayState());
    const uint64_t launched = dev->command_launches() - before;
    read_back(dev, host, infos, bufs);
    return launched;
}

}  // namespace

// Hooks of the C++ text code (tokenizer, chat templates), in files of their own.
void register_text_testing(py::module_& m);
void register_chat_testing(py::module_& m);
void register_whisper_testing(py::module_& m);

PYBIND11_MODULE(_testing, m) {
    m.doc() = "akunu test hooks: single kernels, backend introspection, parameter layouts (not public API)";
    register_error_translator();
    register_text_testing(m);
    register_chat_testing(m);
    register_whisper_testing(m);

    m.def("run_table", &run_table, py::arg("commands"), py::arg("buffers"), py::arg("device") = "cpu",
          py::arg("n_threads") = 1,
          "Kernels (name, buffer indices, params) over shared numpy buffers as one table replay; "
          "returns the launches the device made (0 where it does not count them).");
    m.def("run_kernel", &run_kernel, py::arg("name"), py::arg("buffers"), py::arg("params"),
          py::arg("n_threads") = 2, py::arg("device") = "cpu", py::arg("batch_rows") = 0,
          "Run one kernel by name on numpy buffers (C-contiguous, writable) with packed parameter bytes "
          "(tests.fixtures.kernel_params) on a device: 'cpu' (the reference), 'metal-emu', 'cuda', 'metal'. "
          "batch_rows > 0 first tells the device a batch engine of that many sequences is made "
          "(Device::set_batch_rows: the kernels of batch tables it picks by that).");

    m.def("regroup_x8", [](py::bytes data, uint32_t dtype, int64_t rows, int64_t cols, bool back) {
        const DTypeDescriptor* dt = dtype_lookup(kX8Base + dtype);
        std::string s = data;
        if (!dt || !is_x8_dtype(kX8Base + dtype) || rows < 0 || cols <= 0 || cols % dt->block_elems != 0 ||
            (uint64_t)s.size() != (uint64_t)rows * (cols / dt->block_elems) * dt->block_bytes)
            throw Error("regroup_x8: no x8 layout for this type, or the sizes do not match");
        std::string out(s.size(), '\0');
        (back ? blocks::ungroup_x8 : blocks::regroup_x8)(dtype, (const uint8_t*)s.data(), (uint8_t*)out.data(), rows,
                                                        cols);
        return py::bytes(out);
    }, py::arg("data"), py::arg("dtype"), py::arg("rows"), py::arg("cols"), py::arg("back") = false,
       "The loader's regrouping of rows of a GGML type into its x8 GPU layout (back: and back again).");

    m.def("param_layouts", &param_layouts,
          "Every parameter struct of core/kernel_params.h: {name: {'size', 'fields': {field: offset}, "
          "'formats': {field: 'I' | 'i' | 'f' | '3I' ...}}}, fields in declaration order.");
    m.def("param_enums", &param_enums, "The enums of core/kernel_params.h: {enum: {name: value}}.");

    m.def("count_physical_cores", &count_physical_cores, py::arg("cpus"), py::arg("sysfs_cpu_root"),
          "Distinct cores among logical CPUs, read from a sysfs cpu tree (cpuN/topology/{physical_package_id,core_id}).");
    m.def("cpu_kernel_names", &cpu_kernel_names, "Every kernel of the CPU backend (the reference set).");
    m.def("metal_kernel_names", &metal_kernel_names, "akunu kernels the Metal backend implements.");
    m.def("metal_function_names", &metal_function_names, "MSL functions the Metal launch specs may use.");
    m.def("metal_emu_function_counts", &EmulatedMetalDevice::function_counts,
          "MSL functions run by device 'metal-emu' in this process, with counts.");
    m.def("metal_launch", [](const std::string& name, py::bytes params, int cores, int family) {
        const MetalKernelSpec* spec = metal_kernel_spec(name);
        if (!spec) throw Error("Metal backend has no kernel named '" + name + "'");
        std::string pb = params;
        pb.resize(DispatchCmd::MAX_PARAM_BYTES);
        MetalLaunch l = spec->launch((const uint8_t*)pb.data(), ChipConfig::from_gpu(cores, family));
        py::dict d;
        d["function"] = spec->functions[l.variant];
        d["grid"] = py::make_tuple(l.grid.x, l.grid.y, l.grid.z);
        d["threads"] = l.threads;
        d["tg_memory"] = l.tg_memory;
        return d;
    }, py::arg("name"), py::arg("params"), py::arg("cores"), py::arg("family"),
       "The Metal launch of kernel `name` for packed params on a GPU of `cores` cores and Apple family "
       "`family`: MSL function, grid, threads per threadgroup, threadgroup memory.");
    m.def("metal_chip_config", [](int cores, int family) {
        ChipConfig c = ChipConfig::from_gpu(cores, family);
        py::dict d;
        d["slc_bytes"] = c.slc_bytes;
        d["should_fuse_weights"] = c.should_fuse_weights;
        d["q4_small_k_threshold"] = c.q4_small_k_threshold;
        d["gemv_wide_standard"] = c.gemv_wide_standard;
        d["chain_decode_chunk"] = c.chain_decode_chunk;
        d["norm_tg_size"] = c.norm_tg_size;
        return d;
    }, py::arg("cores"), py::arg("family"), "The Metal backend's tuning for a GPU of `cores` cores and family.");
}
