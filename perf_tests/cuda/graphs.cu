// graphs.cu - CUDA graphs vs a launch loop of tiny kernels.
//
// Build:  nvcc -O2 -arch=sm_90 -o graphs graphs.cu      (sm_90 = H100/H200; use your GPU's arch)
// Run:    ./graphs                        N sweep (loop vs graph), counter check, clocks, baked pointers
//         ./graphs --baked-pointer-only   only the baked-pointer hazard (run it under compute-sanitizer:
//                                         compute-sanitizer --tool memcheck ./graphs --baked-pointer-only)
// Options: --repeats R (50)  --sizes 8,64,512,4096  --d-bytes B (4: size of the captured buffer)
//          --chain K (4: allocations made after the free; the last one is d2)  --baked-n N (8)
//          --alloc-before-free (make the chain before the free, so no allocation can take the freed address)
//
// Prints ONE JSON object to stdout (diagnostics go to stderr). Times are milliseconds, medians of
// R repeats after one warmup; per-launch overheads are microseconds.
//
// What is measured:
//  * loop: N launches tiny<<<1,1,0,stream>>>(d) on a non-default stream, bracketed by cudaEvents,
//    then cudaStreamSynchronize. The kernel does one add, so the time is launch overhead.
//  * graph: the same N launches captured once (cudaStreamBeginCapture/EndCapture, instantiate);
//    one cudaGraphLaunch per repeat, bracketed by the same events.
//  * clocks: one sequence timed by std::chrono::steady_clock without synchronize (host issue time),
//    with cudaStreamSynchronize (synced wall time), and by cudaEvents (device time).
//  * baked pointers: a graph captured on d keeps writing d's address after d is replaced:
//    (a) keep-alive: d2 allocated while d lives -> replay updates d, never d2;
//    (b) cudaFree(d) then a chain of cudaMalloc -> the replay writes the freed address: into
//        whichever new allocation reuses it (silent corruption), or into freed memory (which memcheck
//        reports as an invalid __global__ access, the read of d[0] += 1 first; without the sanitizer
//        it may fault, which is recorded and ends the program). With --alloc-before-free the chain
//        is allocated while d lives, so the second case is forced.
//    The right fix is to update the instantiated graph with the new pointer (cudaGraphExecUpdate
//    from a recaptured graph, or cudaGraphExecKernelNodeSetParams) or to recapture.

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDA_CHECK(call)                                                      \
    do {                                                                      \
        cudaError_t err_ = (call);                                            \
        if (err_ != cudaSuccess) {                                            \
            fprintf(stderr, "CUDA error at %s:%d\n  '%s'\n  -> %s\n",         \
                    __FILE__, __LINE__, #call, cudaGetErrorString(err_));     \
            exit(EXIT_FAILURE);                                               \
        }                                                                     \
    } while (0)

__global__ void tiny(float* d) { d[0] += 1.0f; }   // negligible work - overhead dominates

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------ helpers

static double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static std::string num(double x) {
    if (!std::isfinite(x)) return "null";   // NaN or inf is not JSON
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", x);
    return buf;
}

static std::string ptr_num(const void* p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
    return buf;
}

static std::string str(const char* s) {
    std::string out = "\"";
    for (const char* c = s; *c; ++c) {
        if (*c == '"' || *c == '\\') out += '\\';
        if (static_cast<unsigned char>(*c) >= 0x20) out += *c;
    }
    return out + "\"";
}

static std::string boolean(bool b) { return b ? "true" : "false"; }

static std::string array(const std::vector<double>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + num(v[i]);
    return out + "]";
}

static double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Options {
    bool baked_only = false;
    int repeats = 50;
    std::vector<int> sizes{8, 64, 512, 4096};
    size_t d_bytes = sizeof(float);
    int chain = 4;
    int baked_n = 8;
    bool alloc_before_free = false;
};

static bool parse_int(const char* text, long long lo, long long hi, long long* out) {
    char* end = nullptr;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int usage(const char* msg) {
    fprintf(stderr, "graphs: %s\nusage: graphs [--baked-pointer-only] [--repeats R] [--sizes 8,64,512,4096] "
                    "[--d-bytes B] [--chain K] [--baked-n N] [--alloc-before-free]\n", msg);
    return 2;
}

static int parse_args(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        long long v = 0;
        if (!strcmp(a, "--baked-pointer-only")) {
            o->baked_only = true;
        } else if (!strcmp(a, "--alloc-before-free")) {
            o->alloc_before_free = true;
        } else if (i + 1 < argc && !strcmp(a, "--repeats")) {
            if (!parse_int(argv[++i], 1, 100000, &v)) return usage("--repeats needs a whole number >= 1");
            o->repeats = static_cast<int>(v);
        } else if (i + 1 < argc && !strcmp(a, "--d-bytes")) {
            if (!parse_int(argv[++i], static_cast<long long>(sizeof(float)), 1LL << 34, &v))
                return usage("--d-bytes needs a byte count >= 4");
            o->d_bytes = static_cast<size_t>(v);
        } else if (i + 1 < argc && !strcmp(a, "--chain")) {
            if (!parse_int(argv[++i], 0, 4096, &v)) return usage("--chain needs a whole number >= 0");
            o->chain = static_cast<int>(v);
        } else if (i + 1 < argc && !strcmp(a, "--baked-n")) {
            if (!parse_int(argv[++i], 1, 1 << 20, &v)) return usage("--baked-n needs a whole number >= 1");
            o->baked_n = static_cast<int>(v);
        } else if (i + 1 < argc && !strcmp(a, "--sizes")) {
            o->sizes.clear();
            std::string list = argv[++i];
            size_t start = 0;
            while (start <= list.size()) {
                size_t comma = list.find(',', start);
                std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (!parse_int(item.c_str(), 1, 1 << 20, &v)) return usage("--sizes needs comma-separated counts >= 1");
                o->sizes.push_back(static_cast<int>(v));
                if (comma == std::string::npos) break;
                start = comma + 1;
            }
        } else {
            return usage((std::string("unknown or incomplete option ") + a).c_str());
        }
    }
    return 0;
}

// ------------------------------------------------------------------------- loop, graph, clocks

static void launch_loop(float* d, int n, cudaStream_t s) {
    for (int i = 0; i < n; ++i) tiny<<<1, 1, 0, s>>>(d);
    CUDA_CHECK(cudaGetLastError());
}

// Capture n launches on d into an executable graph. No blocking call inside the capture.
static cudaGraphExec_t capture(float* d, int n, cudaStream_t s, cudaGraph_t* graph) {
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; ++i) tiny<<<1, 1, 0, s>>>(d);   // d's address is baked into each node
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamEndCapture(s, graph));
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, *graph, 0));
    return exec;
}

struct Seq {
    float* d;
    int n;
    cudaStream_t s;
    cudaGraphExec_t exec;
    void issue(bool graph) const {
        if (graph) {
            CUDA_CHECK(cudaGraphLaunch(exec, s));
        } else {
            launch_loop(d, n, s);
        }
    }
};

static double timed(const Seq& q, bool graph, cudaEvent_t a, cudaEvent_t b) {
    CUDA_CHECK(cudaEventRecord(a, q.s));
    q.issue(graph);
    CUDA_CHECK(cudaEventRecord(b, q.s));
    CUDA_CHECK(cudaStreamSynchronize(q.s));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

struct ClockSamples {
    std::vector<double> issue, wall, event;
};

// issue: steady_clock from t0 to after the last launch (no sync); wall: to after the sync;
// event: device time between the events. issue <= wall by construction; event <= wall up to the
// event timer resolution (the events are recorded after t0 and complete before the sync returns).
static ClockSamples clocks(const Seq& q, bool graph, int repeats, cudaEvent_t a, cudaEvent_t b) {
    ClockSamples c;
    for (int r = 0; r < repeats + 1; ++r) {   // r == 0: warmup
        CUDA_CHECK(cudaStreamSynchronize(q.s));
        Clock::time_point t0 = Clock::now();
        CUDA_CHECK(cudaEventRecord(a, q.s));
        q.issue(graph);
        CUDA_CHECK(cudaEventRecord(b, q.s));
        Clock::time_point t1 = Clock::now();
        CUDA_CHECK(cudaStreamSynchronize(q.s));
        Clock::time_point t2 = Clock::now();
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r == 0) continue;
        c.issue.push_back(ms_between(t0, t1));
        c.wall.push_back(ms_between(t0, t2));
        c.event.push_back(ms);
    }
    return c;
}

static std::string clocks_json(const ClockSamples& c) {
    return "{\"issue_ms\":" + num(median(c.issue)) + ",\"synced_wall_ms\":" + num(median(c.wall)) +
           ",\"event_ms\":" + num(median(c.event)) + ",\"issue_ms_all\":" + array(c.issue) +
           ",\"synced_wall_ms_all\":" + array(c.wall) + ",\"event_ms_all\":" + array(c.event) + "}";
}

static std::string sweep_one(int n, int repeats, cudaStream_t s, cudaEvent_t a, cudaEvent_t b) {
    float* d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, sizeof(float)));
    CUDA_CHECK(cudaMemset(d, 0, sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaGraph_t graph = nullptr;
    Seq q{d, n, s, capture(d, n, s, &graph)};

    timed(q, false, a, b);   // one warmup of each
    timed(q, true, a, b);
    std::vector<double> loop_ms, graph_ms;
    for (int r = 0; r < repeats; ++r) {   // alternate, so drift affects both alike
        loop_ms.push_back(timed(q, false, a, b));
        graph_ms.push_back(timed(q, true, a, b));
    }

    // Counter check: from 0, 3 loops + 5 replays must give exactly 8 * n (exact in float below 2^24).
    const int loops = 3, replays = 5;
    CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(float), s));
    for (int i = 0; i < loops; ++i) q.issue(false);
    for (int i = 0; i < replays; ++i) q.issue(true);
    CUDA_CHECK(cudaStreamSynchronize(s));
    float observed = -1.0f;
    CUDA_CHECK(cudaMemcpy(&observed, d, sizeof(float), cudaMemcpyDeviceToHost));
    const double expected = static_cast<double>(n) * (loops + replays);

    ClockSamples cl_loop = clocks(q, false, repeats, a, b);
    ClockSamples cl_graph = clocks(q, true, repeats, a, b);

    CUDA_CHECK(cudaGraphExecDestroy(q.exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaFree(d));

    const double lm = median(loop_ms), gm = median(graph_ms);
    return "{\"n_launches\":" + std::to_string(n) + ",\"loop_ms\":" + num(lm) + ",\"graph_ms\":" + num(gm) +
           ",\"speedup\":" + num(lm / gm) + ",\"us_per_launch_loop\":" + num(lm * 1000.0 / n) +
           ",\"us_per_launch_graph\":" + num(gm * 1000.0 / n) +
           ",\"count_ok\":" + boolean(static_cast<double>(observed) == expected && expected < 16777216.0) +
           ",\"count_expected\":" + num(expected) + ",\"count_observed\":" + num(observed) +
           ",\"loop_event_ms\":" + array(loop_ms) + ",\"graph_event_ms\":" + array(graph_ms) +
           ",\"clocks\":{\"loop\":" + clocks_json(cl_loop) + ",\"graph\":" + clocks_json(cl_graph) + "}}";
}

// ------------------------------------------------------------------------------ baked pointers

static float read_float(const float* d) {
    float v = -1.0f;
    CUDA_CHECK(cudaMemcpy(&v, d, sizeof(float), cudaMemcpyDeviceToHost));
    return v;
}

// (a) d2 allocated while d is alive: the replay updates d (captured) and never d2.
static std::string baked_keep_alive(int n, cudaStream_t s) {
    float *d = nullptr, *d2 = nullptr;
    CUDA_CHECK(cudaMalloc(&d, sizeof(float)));
    CUDA_CHECK(cudaMemset(d, 0, sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = capture(d, n, s, &graph);
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const float first = read_float(d);
    CUDA_CHECK(cudaMalloc(&d2, sizeof(float)));   // "d = d2": the graph does not know
    CUDA_CHECK(cudaMemset(d2, 0, sizeof(float)));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const float old_v = read_float(d), new_v = read_float(d2);
    const std::string out = "{\"old_ptr\":" + ptr_num(d) + ",\"d2_ptr\":" + ptr_num(d2) +
                            ",\"value_after_first_replay\":" + num(first) + ",\"old_value\":" + num(old_v) +
                            ",\"d2_value\":" + num(new_v) + ",\"expected_old_value\":" + num(2.0 * n) +
                            ",\"old_updated\":" + boolean(old_v == 2.0f * n) + ",\"d2_updated\":" +
                            boolean(new_v != 0.0f) + "}";
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(d2));
    return out;
}

// (b) cudaFree(d), then `chain` + 1 allocations of one float (the last is d2), then replay.
// alloc_before_free: the allocations are made while d lives (none can reuse its address).
// Must run last: a fault here (cudaErrorIllegalAddress) is sticky and ends all CUDA work.
static std::string baked_free_chain(int n, size_t d_bytes, int chain, bool alloc_before_free, cudaStream_t s,
                                    bool* sticky) {
    float* d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, d_bytes));
    CUDA_CHECK(cudaMemset(d, 0, d_bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = capture(d, n, s, &graph);
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    const float before = read_float(d);
    const uintptr_t old = reinterpret_cast<uintptr_t>(d);
    std::vector<float*> bufs(static_cast<size_t>(chain) + 1, nullptr);
    auto allocate = [&bufs]() {
        for (float*& p : bufs) {
            CUDA_CHECK(cudaMalloc(&p, sizeof(float)));
            CUDA_CHECK(cudaMemset(p, 0, sizeof(float)));
        }
    };
    if (alloc_before_free) allocate();
    CUDA_CHECK(cudaFree(d));                       // the graph still holds this address
    if (!alloc_before_free) allocate();
    CUDA_CHECK(cudaDeviceSynchronize());
    float* d2 = bufs.back();
    int aliased = -1;                              // a live buffer containing the old address
    for (size_t i = 0; i < bufs.size(); ++i) {
        const uintptr_t p = reinterpret_cast<uintptr_t>(bufs[i]);
        if (p <= old && old < p + sizeof(float)) aliased = static_cast<int>(i);
    }

    const cudaError_t launch_err = cudaGraphLaunch(exec, s);
    const cudaError_t sync_err = launch_err == cudaSuccess ? cudaStreamSynchronize(s) : cudaSuccess;
    const bool ok = launch_err == cudaSuccess && sync_err == cudaSuccess;
    std::vector<double> values;
    cudaError_t read_err = cudaSuccess;
    if (ok) {
        for (float* p : bufs) {
            float v = -1.0f;
            read_err = cudaMemcpy(&v, p, sizeof(float), cudaMemcpyDeviceToHost);
            if (read_err != cudaSuccess) break;
            values.push_back(v);
        }
    }
    const bool have_values = ok && read_err == cudaSuccess;
    *sticky = !have_values;

    std::string ptrs = "[";
    for (size_t i = 0; i < bufs.size(); ++i) ptrs += (i ? "," : "") + ptr_num(bufs[i]);
    ptrs += "]";
    std::string out = "{\"d_bytes\":" + std::to_string(d_bytes) +
                      ",\"alloc_before_free\":" + boolean(alloc_before_free) + ",\"old_ptr\":" + ptr_num(d) +
                      ",\"value_before_free\":" + num(before) + ",\"chain_ptrs\":" + ptrs +
                      ",\"d2_ptr\":" + ptr_num(d2) + ",\"aliased_index\":" + std::to_string(aliased) +
                      ",\"d2_same_address_as_old\":" + boolean(reinterpret_cast<uintptr_t>(d2) == old) +
                      ",\"launch_error\":" + str(cudaGetErrorName(launch_err)) +
                      ",\"sync_error\":" + str(cudaGetErrorName(sync_err)) +
                      ",\"read_error\":" + str(cudaGetErrorName(read_err)) +
                      ",\"chain_values\":" + (have_values ? array(values) : std::string("null")) +
                      ",\"d2_value\":" + (have_values ? num(values.back()) : std::string("null")) +
                      ",\"d2_updated\":" + (have_values ? boolean(values.back() != 0.0) : std::string("null")) +
                      ",\"aliased_value\":" +
                      (have_values && aliased >= 0 ? num(values[static_cast<size_t>(aliased)]) : std::string("null")) +
                      "}";
    if (have_values) {
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        for (float* p : bufs) CUDA_CHECK(cudaFree(p));
    }
    return out;
}

// ----------------------------------------------------------------------------------------- main

int main(int argc, char** argv) {
    Options o;
    if (int rc = parse_args(argc, argv, &o)) return rc;

    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int runtime = 0, driver = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUDA_CHECK(cudaDriverGetVersion(&driver));

    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));              // non-default stream: capture needs it

    std::string json = "{\"program\":\"graphs.cu\",\"mode\":" +
                       str(o.baked_only ? "baked-pointer-only" : "full") + ",\"device\":{\"name\":" +
                       str(prop.name) + ",\"compute_capability\":\"" + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor) + "\",\"cuda_runtime\":" + std::to_string(runtime) +
                       ",\"cuda_driver\":" + std::to_string(driver) + "},\"repeats\":" +
                       std::to_string(o.repeats) + ",\"warmup\":1";

    if (!o.baked_only) {
        cudaEvent_t a, b;
        CUDA_CHECK(cudaEventCreate(&a));
        CUDA_CHECK(cudaEventCreate(&b));
        json += ",\"sweep\":[";
        for (size_t i = 0; i < o.sizes.size(); ++i) {
            json += (i ? "," : "") + sweep_one(o.sizes[i], o.repeats, s, a, b);
            fprintf(stderr, "graphs: N=%d done\n", o.sizes[i]);
        }
        json += "]";
        CUDA_CHECK(cudaEventDestroy(a));
        CUDA_CHECK(cudaEventDestroy(b));
        json += ",\"baked_pointer_keep_alive\":" + baked_keep_alive(o.baked_n, s);
    }

    bool sticky = false;
    json += ",\"baked_pointer\":" + baked_free_chain(o.baked_n, o.d_bytes, o.chain, o.alloc_before_free, s, &sticky);
    json += ",\"baked_n\":" + std::to_string(o.baked_n) + ",\"chain\":" + std::to_string(o.chain) + "}";
    printf("%s\n", json.c_str());
    fflush(stdout);
    if (!sticky) CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}
