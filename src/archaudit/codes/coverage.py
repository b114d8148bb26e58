"""The C, G and K codes: claims, coverage per library, coverage per container and kernel."""

from __future__ import annotations

from . import ERROR, INFO, WARNING, Code, CodeInfo

COVERAGE: list[CodeInfo] = [
    CodeInfo(
        Code.C001,
        ERROR,
        "no claim",
        "The wheel carries GPU device code (or links a GPU runtime) but no claimed architecture "
        "list reached the check, so coverage cannot be verified.",
        "Give the architectures it was built for (--arch '80;90', or cuda-archs in [tool.archaudit]); "
        "auditing someone else's wheel, ask about your GPUs instead (--gpu T4 --gpu H100).",
        "x.whl: GPU wheel, no claimed architectures. Fix: give them (--arch '80;90', cuda-archs in "
        "[tool.archaudit]) or ask about GPUs (--gpu T4 --gpu H100)",
    ),
    CodeInfo(
        Code.C002,
        ERROR,
        "unparseable claim",
        "A claimed architecture list could not be parsed.",
        "Use one of the spellings in the README (CMake, TORCH_CUDA_ARCH_LIST, -gencode, plain).",
        "--arch: 'sm_8x' is not a CUDA architecture",
    ),
    CodeInfo(
        Code.C003,
        WARNING,
        "embedded claim disagrees",
        "A binary embeds an architecture list different from the claim the check was given.",
        "Make the build's arch list and the release's claim the same list.",
        "libtorch_cuda.so embeds 8.0, 9.0 but --arch says 8.0, 9.0, 10.0. Fix: make the build's arch list and "
        "the release's claim the same list",
    ),
    CodeInfo(
        Code.G001,
        ERROR,
        "claimed architecture not covered",
        "A library carries device code, but none of it runs on a claimed GPU architecture: a "
        "model using it fails there with 'no kernel image is available for execution'.",
        "The project's own library: build it for the architecture (-gencode / CMAKE_CUDA_ARCHITECTURES "
        "/ TORCH_CUDA_ARCH_LIST), or, where the project's host code never loads it there, record that "
        "gate with the entry the message ends with ([[tool.archaudit.library]] path, arch, reason = the "
        "source line). A vendor library (cuBLAS, cuDNN): nothing to rebuild; it is judged by its "
        "vendor's documented range.",
        "libshim.so has no code for 9.0 (claimed). Fix: build for sm_90, or record its gate: "
        '[[tool.archaudit.library]] path = "libshim.so" arch = "80" reason = "<file:line>". It carries '
        "code only for sm_80 (claimed: 80, 90, from --arch); 1 kernel (mul) would fail there",
    ),
    CodeInfo(
        Code.G002,
        INFO,
        "covered only through PTX JIT",
        "A claimed architecture has no native code (SASS) in the library; the driver JIT-compiles "
        "PTX on first use, which costs seconds to minutes at start-up.",
        "The project's own library: add real (SASS) code for the architecture, e.g. '90-real' or code=sm_90. "
        "A vendor library: nothing to rebuild; the JIT cost is its vendor's choice.",
        "libfoo.so runs on 120 only through PTX JIT (compute_90)",
    ),
    CodeInfo(
        Code.G003,
        ERROR,
        "architecture carried but not claimed (--exact)",
        "With --exact, a library carrying code for an unclaimed architecture means the release's "
        "list never reached the build.",
        "Make the build use the release's list, or claim the architecture.",
        "libfoo.so carries 7.5, which the claim does not list (--exact). Fix: build with the release's list, "
        "or claim it",
    ),
    CodeInfo(
        Code.G004,
        ERROR,
        "no PTX for the newest architecture (--require-ptx newest)",
        "No PTX for the newest claimed architecture, so future GPUs cannot JIT this library.",
        "Add PTX for it (e.g. '120' or '120-virtual', or '12.0+PTX').",
        "libfoo.so carries no PTX for compute_120, the newest claimed (--require-ptx newest). Fix: add it "
        "('120' or '12.0+PTX')",
    ),
    CodeInfo(
        Code.G005,
        INFO,
        "specialised library",
        "All of the library's device code is arch-specific ('a') or family ('f') code: it serves "
        "only those GPUs. This is said, not excused: a claimed GPU it does not serve is G001 like "
        "any other (a library built only for sm_100f fails a claim of 80;90;100).",
        "Nothing, if the claim names only the GPUs it serves. Otherwise, the project's own library: build the "
        "claim's plain architectures too, or record a deliberate gap with ignore-library and its reason; a "
        "vendor library: nothing to rebuild, it is judged by its vendor's documented range.",
        "libhopper.so is specialised: serves only 9.0 (sm_90a)",
    ),
    CodeInfo(
        Code.G006,
        ERROR,
        "GPU wheel without device code",
        "The wheel links a GPU runtime or was given a claim, yet no library carries device code.",
        "Check the build actually compiled device code (a CUDA language not enabled, a wrong "
        "option) or that the expected library is shipped.",
        "x.whl: GPU wheel but no library carries device code",
    ),
    CodeInfo(
        Code.G007,
        INFO,
        "relocatable device code only",
        "Device code found only in __nv_relfatbin (from -rdc objects); it is not loaded on its "
        "own and does not count as coverage.",
        "Nothing, if the executable fatbin covers the claim.",
        "libfoo.so: 2 relocatable entries are not loadable coverage",
    ),
    CodeInfo(
        Code.G008,
        INFO,
        "GPU coverage for a GPU",
        "The answer to --gpu: how the library runs on the named GPU.",
        "Nothing: it is the answer. A 'not at all' is G009 (the project's own library: build for the GPU's "
        "architecture; a vendor library: nothing to rebuild).",
        "libfoo.so on H100 (9.0): native",
    ),
    CodeInfo(
        Code.G009,
        ERROR,
        "does not run on the requested GPU",
        "With --gpu, a library carries device code but none runs on that GPU, some of its kernels "
        "cannot run there with nothing in the binary saying it is by design, or the wheel's platform "
        "cannot be installed there (a Jetson runs Linux on aarch64: an x86-64 or Windows wheel never "
        "reaches it).",
        "The project's own library: build for that GPU's architecture (or PTX of an older one), or "
        "record the host's gate with the [[tool.archaudit.library]] entry the message ends with. A "
        "vendor library: nothing to rebuild; a GPU outside its vendor's documented range is not "
        "supported.",
        "libfoo.so on H100 (9.0): 1 kernel cannot run there (native for the rest). Fix: build for "
        'sm_90, or record its gate: [[tool.archaudit.library]] path = "libfoo.so" arch = "100" '
        'reason = "<file:line>". They carry only sm_100: 1 kernel (zero_fill)',
    ),
    CodeInfo(
        Code.G010,
        INFO,
        "device code without kernels",
        "Every container of the library was read whole and defines no kernel: nvlink's kernel-less "
        "device-link stubs, or cubins with no kernel (NPP 13.2's libnppc.so.13 carries one sm_75 "
        "cubin with no .text and no symbols, in an ordinary .nv_fatbin). Nothing in it can be "
        "launched, so there is no coverage to judge; a kernel-less container beside others is not "
        "judged either. Any other container is judged by its targets, kernels identified or not.",
        "Nothing; the project's own build that needs no device code there can drop it (a vendor library: "
        "nothing to rebuild).",
        "libcufftw.so.12 carries device code without kernels (its containers define no kernel: sm_75)",
    ),
    CodeInfo(
        Code.G011,
        ERROR,
        "claimed vendor without device code",
        "Architectures were claimed for a GPU vendor (CUDA through --arch, AMD through --amd-arch), or "
        "--gpu asks about a GPU of that vendor, but no library of the target carries loadable device "
        "code of that vendor: nothing runs on the GPUs claimed or asked about (--gpu MI300X on a "
        "CUDA-only wheel is a no, never a pass).",
        "Ship the vendor's build, or stop claiming its architectures.",
        "x.whl: claims AMD targets gfx942 (--amd-arch) but no library carries AMD device code. Fix: ship the "
        "ROCm build, or stop claiming AMD targets",
    ),
    CodeInfo(
        Code.G012,
        ERROR,
        "code no driver can run on a claimed GPU",
        "A claimed GPU is covered only by code that needs a newer CUDA release than the last driver "
        "of the GPU's generation supports (Kepler's R470 stops at CUDA 11.4, PTX ISA 7.4; Maxwell to "
        "Volta end with R580, CUDA 13.0): no driver that still runs the GPU can run the code.",
        "The project's own library: build that GPU's code with a toolkit its last driver supports (or lower "
        "the PTX ISA), or stop claiming the GPU. A vendor library: nothing to rebuild; ship the vendor's "
        "release that supports the GPU, or stop claiming it.",
        "libcatboost.so on 3.5 (claimed) has only code no driver can run there: the last driver for 3.5 GPUs "
        "supports CUDA 11.4. Fix: build 3.5's code with CUDA 11.4 or older, or stop claiming it. It has only "
        "compute_35 (PTX ISA 7.8)",
    ),
    CodeInfo(
        Code.G013,
        ERROR,
        "code not loadable alone, and nothing links it",
        "On a claimed GPU the driver picks a relocatable cubin (-rdc) that calls device code it does "
        "not carry; cuModuleLoadData refuses it alone (CUDA_ERROR_NOT_FOUND), and nothing in the "
        "library shows it links device code at run time (nvJitLink linked, dlopened or looked up, as "
        "cuSPARSE does for user operators). A bare .fatbin or .cubin file has no linker at all.",
        "The project's own library: link the device code at build time (nvcc -dlink, or without -rdc), or "
        "link it at run time with nvJitLink before loading it. A vendor library: nothing to rebuild; report "
        "it to its vendor.",
        "rdc_ext.fatbin: on 9.0 (claimed) the driver picks, in 1 container, relocatable cubins (-rdc) "
        "that call _Z10rdc_helperf without carrying it, and nothing in the library links device code at "
        "run time (no nvJitLink): they do not load alone (CUDA_ERROR_NOT_FOUND)",
    ),
    CodeInfo(
        Code.G014,
        WARNING,
        "AMD code object more specific than its bundle id",
        "A code object's own xnack/sramecc setting (ELF e_flags) is one its bundle id leaves open. ROCm "
        "selects the entry by its id on either setting and its loader refuses the code object on the "
        "other, so archaudit judges the code object as built.",
        "The project's own library: bundle the code object under the id it was built for "
        "(--offload-arch=gfx90a:xnack+), or build it without the setting. A vendor library: nothing to "
        "rebuild; report it to its vendor.",
        "libfoo.so: 1 bundle entry says less than its code object, judged as built. Fix: bundle it under the "
        "id it was built for (--offload-arch=gfx90a:xnack+). Its id: hipv4-amdgcn-amd-amdhsa--gfx90a holds a "
        "code object built for gfx90a:xnack+",
    ),
    CodeInfo(
        Code.G015,
        WARNING,
        "AMD bundle entries HIP never selects",
        "A bundle entry whose offload kind is not hip, hipv4 or hcc (an OpenMP entry), or whose id is not "
        "spelt as comgr compares it (the triple amdgcn-amd-amdhsa-- in lower case: clang 11 and older "
        "wrote hip-amdgcn-amd-amdhsa-gfx906, which the HIP runtime of ROCm 3.5 to 5.4 selects and today's does "
        "not), is never selected by HIP's code object lookup; it counts for no GPU. A library that links the HIP "
        "of ROCm 3 or 4 (NEEDED libamdhip64.so.3, .so.4) is judged by that release's lookup instead.",
        "The project's own library: bundle HIP code as hipv4-amdgcn-amd-amdhsa--<target> (what clang's HIP "
        "driver writes; rebuild with a current clang). A vendor library: nothing to rebuild; use a release "
        "built by a current ROCm.",
        "libfoo.so: HIP never selects 1 bundle entry, which count for no GPU. Fix: bundle HIP code as "
        "hipv4-amdgcn-amd-amdhsa--<target> (a current clang). openmp-amdgcn-amd-amdhsa--gfx90a: ...",
    ),
    CodeInfo(
        Code.G016,
        INFO,
        "claimed GPUs outside the vendor's documented range",
        "The library is a vendor library (data/vendor.json: its file name and a string of its own bytes "
        "identify it; its release line is the CUDA major that built it and, where its bytes carry one, "
        "its vendor's version) and its vendor documents that release for a range of GPUs, each row with "
        "its source: cuBLAS for CUDA 13 from 7.5, cuSPARSELt from 8.0, cuDNN 9.17 for CUDA 12 from 7.5 to "
        "12.1. Claimed GPUs outside that range, and GPUs named with --gpu outside it, are not supported "
        "by it: it is not judged there, and its callers use it only inside it (torch calls cuSPARSELt "
        "only on 8.0+). Where no other library of the target runs on such a GPU, G019 fails it.",
        "Nothing, where another library serves those GPUs; otherwise stop claiming them.",
        "torch/lib/libcusparseLt-294d6944.so.0: the claimed 7.5 is not supported by its vendor, so not held "
        "against it: it is cuSPARSELt for CUDA 12, which its vendor documents for 8.0 to 12.1 (its bytes hold "
        '"cusparseLtGetVersion"; ...)',
    ),
    CodeInfo(
        Code.G017,
        ERROR,
        "kernels its loader never reaches",
        "A bare device-code file (.fatbin, an offload-bundle file) holds several containers, and "
        "kernels only the later ones define: cuModuleLoad and hipModuleLoad read the first container "
        "and no further, so those kernels are reachable from no module (cuModuleGetFunction fails "
        "with CUDA_ERROR_NOT_FOUND, 500, on an H100). The later containers count for no GPU.",
        "The project's own file: build one container per file (nvcc -fatbin of all the sources at once, or "
        "one file each), or link the objects before packing them. A vendor library: nothing to rebuild; "
        "report it to its vendor.",
        "kernels.fatbin: 1 kernel is defined only in 1 later container, which cuModuleLoad never reads: "
        "reachable from no module. Fix: write one container per file (nvcc -fatbin of all the sources at "
        "once). Unreached: 1 kernel (layernorm_kernel)",
    ),
    CodeInfo(
        Code.G018,
        WARNING,
        "AMD code objects the loader refuses",
        "An AMD code object without a PT_LOAD segment: a relocatable object (ET_REL) never linked, or "
        "a bare ELF header. ROCr loads code objects by their loadable segments and refuses one without "
        "any on every GPU (HSA_STATUS_ERROR_INVALID_CODE_OBJECT), so it counts for no GPU; where HIP "
        "selects it for a claimed GPU, that GPU runs nothing from its bundle (G001 says so).",
        "The project's own library: link the device code into a code object (clang's HIP driver does: "
        "lld -shared) before bundling it, then rebuild. A vendor library: nothing to rebuild; report it to "
        "its vendor.",
        "libfoo.so: 1 AMD code object without a loadable segment, which ROCr's loader refuses on every GPU: "
        "it counts for no GPU. Fix: link the device code (lld -shared, as clang's HIP driver does) before "
        "bundling. hipv4-amdgcn-amd-amdhsa--gfx90a, as a relocatable object never linked is",
    ),
    CodeInfo(
        Code.G019,
        ERROR,
        "GPU outside every vendor library's documented range",
        "Every library of the target that carries NVIDIA device code is a vendor library (data/vendor.json) "
        "whose vendor does not support the claimed or --gpu GPU for its release (G016): nothing of the "
        "target runs there (cuSPARSELt on a T4, a CUDA 13 cuBLAS on a V100).",
        "Ship the vendor's release that supports the GPU, or stop claiming it.",
        "nvidia_cusparselt_cu12-0.8.1 does not run on Tesla T4 (7.5), outside its vendor libraries' range. "
        "Fix: ship their release that supports it, or stop promising it. They are its only device code: "
        "cuSPARSELt for CUDA 12: 8.0 to 12.1",
    ),
    CodeInfo(
        Code.G020,
        WARNING,
        "vendor release newer than the vendor table",
        "A vendor library's own bytes say it is a release newer than data/vendor.json has rows for (a "
        "newer CUDA major, or a version past the table's known_through): it is judged by its line's "
        "newest row, which may not be its vendor's contract.",
        "Add the release's row to data/vendor.json from its vendor's documentation, with its source.",
        "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9 is cuDNN 9.28.0, newer than data/vendor.json "
        "knows. Fix: add its row to data/vendor.json from its vendor's documentation. It is judged by its "
        "line's newest row, cuDNN 9.17 for CUDA 12 (7.5 to 12.1)",
    ),
    CodeInfo(
        Code.K001,
        ERROR,
        "kernels miss a claimed architecture",
        "One container (one translation unit, which the runtime registers on its own) lacks code "
        "for a claimed architecture that the library as a whole has: its kernels fail there "
        "with 'no kernel image' (209). A library-wide union hides this.",
        "The project's own code: build every object of the library with the claim's architectures, or, "
        "where the host code never launches these kernels there, record that gate with the "
        "[[tool.archaudit.library]] entry the message ends with (with kernels = [globs] where only "
        "these kernels are gated, not the whole library: K006). A vendor library: nothing to rebuild.",
        "libfoo.so: 1 kernel fails on 9.0. Fix: build for sm_90 or record: [[tool.archaudit.library]] path = "
        '"libfoo.so" arch = "80" reason = "<file:line>". Its own container lacks the claimed 9.0, '
        "carrying only sm_80: 1 kernel (mul)",
    ),
    CodeInfo(
        Code.K002,
        INFO,
        "specialised kernels",
        "A kernel's code is all arch-specific ('a') or family ('f') code, and it cannot be meant for "
        "the GPU it misses: its name excludes that GPU (data/names.json), or no generic code of the "
        "library runs there. A generic kernel beside generic code that runs on the GPU is K001. Under "
        "--strict-kernels containers are judged whole.",
        "Nothing: the host must launch these kernels only on the GPUs their code serves.",
        "libfoo.so: 1 kernel not meant for 8.0 (claimed), as designed: all their code is arch-specific "
        "or family code (sm_90a), and their names say so or no generic code of the library runs there",
    ),
    CodeInfo(
        Code.K003,
        INFO,
        "kernels dispatched by architecture",
        "A claimed GPU cannot launch a kernel from its own container, and the binary shows the kernel "
        "is not meant for that GPU: a sourced string in the library's own bytes says its host code "
        "launches it only from a newer architecture (data/vendor.json statements); its name, read by "
        "its author's convention (data/names.json: CUTLASS ArchTags, SM80_* atoms, sm80_xmma_*, "
        "generation words all mean 'this or newer'), names only newer architectures than the GPU; or "
        "the code the GPU runs from that container was compiled for that GPU itself (or is newer than "
        "all code that carries the kernel) and the source left the kernel out (a __CUDA_ARCH__ "
        "guard). A name never excuses a GPU at or above what it names, and a kernel missing from PTX "
        "a newer GPU JIT-compiles is a gap there.",
        "Nothing: the host must not launch these kernels there; archaudit cannot see host code.",
        "libfoo.so: 1 kernel not meant for 7.5 (claimed), as designed: their names mean 8.0 or newer "
        "(CUTLASS ArchTag, data/names.json), and their code is for no older GPU (only sm_80)",
    ),
    CodeInfo(
        Code.K004,
        ERROR,
        "kernels carried for a GPU only by another container",
        "A container's kernels lack code for a claimed GPU, and only another container of the library "
        "carries kernels of the same names for it. The runtime launches each container's kernels from "
        "that container's own module, so launching these there fails ('no kernel image', error 209) "
        "unless the host picks the other container by architecture. The binary cannot say which: "
        "onnxruntime's 4-bit GEMM kernels in their own sm_80 translation unit, or curand's "
        "single-architecture containers, are dispatched; a template instantiated in two objects built "
        "for different lists is not.",
        "The project's own code: build every object with the claim's architectures, or, where the "
        "host picks the container by architecture, record that dispatch with the ignore-library entry "
        "the message ends with. A vendor library: nothing to rebuild.",
        "libx.so: 1 kernel fails on 9.0 unless the host picks another container there. Fix: build for "
        'sm_90 or record: [[tool.archaudit.ignore-library]] code = "K004" library = "libx.so" reason = '
        '"<file:line>". .nv_fatbin[1] (claimed 90) carries only sm_80; only .nv_fatbin[2] carries the '
        "same names",
    ),
    CodeInfo(
        Code.K005,
        INFO,
        "kernels dispatched by their vendor",
        "Kernels of a vendor library (data/vendor.json: its file name and a string of its own bytes "
        "identify it, the CUDA major that built it and its version choose the row) have no code for a "
        "claimed GPU in their own container, and the GPU is inside the range its vendor documents for "
        "that release. The vendor's host code picks a container per GPU (cuBLAS's and cuDNN's kernels "
        "named for one architecture, curand's single-architecture containers), and the vendor builds "
        "and tests the library for that range: a per-kernel gap there is its dispatch, not a crash. "
        "A GPU in the range for which the library carries no loadable code at all is still G001; a "
        "library its bytes do not identify is judged kernel by kernel (K001, K004). The same holds for "
        "a vendor's code linked statically into a project's library: a container every kernel of which "
        "the vendor's kernel-name convention names (data/vendor.json static_kernels), in a library whose "
        "bytes hold the vendor's string.",
        "Nothing; the row names the vendor's documentation.",
        "nvidia/cu13/lib/libcublasLt.so.13: 1380 kernels in 760 containers have no code for 7.5 (claimed) in "
        "their own container, as its vendor dispatches them: it is cuBLAS for CUDA 13, which its vendor "
        "documents for 7.5 and newer, and its host code picks the container for each GPU. 1380 kernels (...)",
    ),
    CodeInfo(
        Code.K006,
        INFO,
        "kernels gated by the project's host code",
        "Kernels of the project's own library have no code for a claimed GPU in their own "
        "container, and the project records where its host code launches them only on other GPUs: "
        "a [[tool.archaudit.library]] entry with kernels (globs over the kernels' names), arch and "
        "reason (the line of its public source that does the gating). On the GPUs of the entry's "
        "arch the kernels are judged as any other (K001); the library's other kernels keep its claim.",
        "Nothing, while the reason holds; keep it pointing at the line that gates, and remove the "
        "entry when the host code changes.",
        "vllm/_C_stable_libtorch.abi3.so: 24 kernels are not launched on 8.0 (claimed): the project's host "
        "code gates them to 90;100 (vllm/model_executor/layers/fused_moe/router/gate_linear.py:40; "
        "[tool.archaudit] library _C_stable_libtorch* kernels fused_a_gemm_kernel). 24 kernels (...)",
    ),
]

__all__ = ["COVERAGE"]
