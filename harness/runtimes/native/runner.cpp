// convconf_runner: runs one ExecuTorch program on given inputs with the wheel's runtime
// (libexecutorch.so) and the Vulkan plug-in, no Python, and writes what happened so that a
// harness on another machine can classify it:
//
//   convconf_runner PROGRAM.pte OUT_DIR [--iters N] INPUT0.bin [INPUT1.bin ...]
//     OUT_DIR/result.json  {"status": "ok" | "runtime_error", "stage", "message",
//                           "outputs": [{"file", "dtype", "sizes"}], "load_s", "run_s", "iters"}
//     OUT_DIR/outputK.bin  output K's raw bytes (little-endian, its dtype)
//     exit 0 ok, 3 runtime error (the runtime returned an error or threw: message kept),
//     2 bad usage/input; a crash is the signal the caller's wait status shows.
//   convconf_runner --devices
//     prints the Vulkan physical devices as JSON (name, type, driver, API version), the
//     loader found through libvulkan.so.1 as the plug-in itself does.
//
// Inputs are raw bytes in the dtype and shape the program's method meta declares (the size must
// match exactly). Raw files, not ExecuTorch's bundled-program format: see README (Vulkan on
// another machine).
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace executorch::runtime;
using executorch::extension::FileDataLoader;
using executorch::extension::MallocMemoryAllocator;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

int finish(const std::string& out_dir, const std::string& body, int code) {
  std::ofstream(out_dir + "/result.json") << "{" << body << "}\n";
  return code;
}

int runtime_error(const std::string& out_dir, const char* stage, const std::string& message) {
  std::fprintf(stderr, "convconf_runner: %s: %s\n", stage, message.c_str());
  return finish(out_dir,
                std::string("\"status\": \"runtime_error\", \"stage\": \"") + stage +
                    "\", \"message\": \"" + json_escape(message) + "\"",
                3);
}

std::string error_text(Error e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "error 0x%x", static_cast<unsigned>(e));
  return buf;
}

int list_devices() {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("{\"devices\": [], \"problem\": \"%s\"}\n", json_escape(dlerror()).c_str());
    return 1;
  }
  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  VkInstance instance;
  if (create(&info, nullptr, &instance) != VK_SUCCESS) {
    std::printf("{\"devices\": [], \"problem\": \"vkCreateInstance failed\"}\n");
    return 1;
  }
  auto enumerate = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(
      gipa(instance, "vkEnumeratePhysicalDevices"));
  auto props2 = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties2>(
      gipa(instance, "vkGetPhysicalDeviceProperties2"));
  uint32_t n = 0;
  enumerate(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  enumerate(instance, &n, devices.data());
  static const char* kTypes[] = {"OTHER", "INTEGRATED_GPU", "DISCRETE_GPU", "VIRTUAL_GPU", "CPU"};
  std::printf("{\"devices\": [");
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p.pNext = &driver;
    props2(devices[i], &p);
    const auto& d = p.properties;
    std::printf(
        "%s{\"deviceName\": \"%s\", \"deviceType\": \"PHYSICAL_DEVICE_TYPE_%s\", "
        "\"driverName\": \"%s\", \"driverInfo\": \"%s\", \"apiVersion\": \"%u.%u.%u\"}",
        i ? ", " : "", json_escape(d.deviceName).c_str(),
        d.deviceType <= 4 ? kTypes[d.deviceType] : "OTHER", json_escape(driver.driverName).c_str(),
        json_escape(driver.driverInfo).c_str(), VK_API_VERSION_MAJOR(d.apiVersion),
        VK_API_VERSION_MINOR(d.apiVersion), VK_API_VERSION_PATCH(d.apiVersion));
  }
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--devices") == 0) return list_devices();
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PROGRAM.pte OUT_DIR [--iters N] INPUT.bin...\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[2];
  int iters = 1;
  std::vector<std::string> input_files;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      input_files.emplace_back(argv[i]);
    }
  }
  runtime_init();
  auto loader = FileDataLoader::from(argv[1]);
  if (!loader.ok()) return runtime_error(out_dir, "open", error_text(loader.error()));
  auto program = Program::load(&loader.get());
  if (!program.ok()) return runtime_error(out_dir, "load_program", error_text(program.error()));
  auto meta = program->method_meta("forward");
  if (!meta.ok()) return runtime_error(out_dir, "method_meta", error_text(meta.error()));

  std::vector<std::unique_ptr<uint8_t[]>> planned;
  std::vector<Span<uint8_t>> spans;
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    size_t n = meta->memory_planned_buffer_size(i).get();
    planned.emplace_back(new uint8_t[n]);
    spans.emplace_back(planned.back().get(), n);
  }
  HierarchicalAllocator planned_alloc({spans.data(), spans.size()});
  MallocMemoryAllocator method_alloc;
  MallocMemoryAllocator temp_alloc;
  MemoryManager memory(&method_alloc, &planned_alloc, &temp_alloc);

  // The Vulkan delegate builds its graph and prepacks weights in load_method; its checks throw
  // (vkcompute::vkapi::Error), which would abort a host that does not catch them.
  double t0 = now();
  std::unique_ptr<Result<Method>> loaded;
  try {
    loaded = std::make_unique<Result<Method>>(program->load_method("forward", &memory));
  } catch (const std::exception& e) {
    return runtime_error(out_dir, "load_method", e.what());
  }
  double load_s = now() - t0;
  Result<Method>& method = *loaded;
  if (!method.ok()) return runtime_error(out_dir, "load_method", error_text(method.error()));

  if (input_files.size() != method->inputs_size()) {
    std::fprintf(stderr, "program takes %zu inputs, %zu given\n", method->inputs_size(),
                 input_files.size());
    return 2;
  }
  std::vector<std::vector<char>> input_bytes(input_files.size());
  for (size_t i = 0; i < input_files.size(); ++i) {
    EValue& v = method->mutable_input(i);
    if (!v.isTensor()) continue;
    auto t = v.toTensor();
    std::ifstream in(input_files[i], std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() != t.nbytes()) {
      std::fprintf(stderr, "%s has %zu bytes, input %zu needs %zu\n", input_files[i].c_str(),
                   data.size(), i, t.nbytes());
      return 2;
    }
    std::memcpy(t.mutable_data_ptr(), data.data(), data.size());
  }

  Error e = Error::Ok;
  t0 = now();
  try {
    for (int it = 0; it < iters && e == Error::Ok; ++it) e = method->execute();
  } catch (const std::exception& ex) {
    return runtime_error(out_dir, "execute", ex.what());
  }
  double run_s = (now() - t0) / iters;
  if (e != Error::Ok) return runtime_error(out_dir, "execute", error_text(e));

  std::ostringstream outputs;
  for (size_t i = 0; i < method->outputs_size(); ++i) {
    const EValue& v = method->get_output(i);
    if (!v.isTensor()) continue;
    auto t = v.toTensor();
    std::string name = "output" + std::to_string(i) + ".bin";
    std::ofstream(out_dir + "/" + name, std::ios::binary)
        .write(static_cast<const char*>(t.const_data_ptr()), t.nbytes());
    outputs << (i ? ", " : "") << "{\"file\": \"" << name << "\", \"dtype\": "
            << static_cast<int>(t.scalar_type()) << ", \"sizes\": [";
    for (ssize_t d = 0; d < t.dim(); ++d) outputs << (d ? ", " : "") << t.size(d);
    outputs << "]}";
  }
  std::ostringstream body;
  body << "\"status\": \"ok\", \"outputs\": [" << outputs.str() << "], \"load_s\": " << load_s
       << ", \"run_s\": " << run_s << ", \"iters\": " << iters;
  return finish(out_dir, body.str(), 0);
}
