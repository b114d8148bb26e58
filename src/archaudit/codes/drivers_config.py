"""The D and X codes: driver floors and the config file."""

from __future__ import annotations

from . import ERROR, INFO, WARNING, Code, CodeInfo

DRIVERS_CONFIG: list[CodeInfo] = [
    CodeInfo(
        Code.D001,
        ERROR,
        "needs a newer driver",
        "With --driver, some claimed (or --gpu) GPU would run PTX or cubins from a CUDA release "
        "whose minimum driver is newer than the one given ('the provided PTX was compiled with an "
        "unsupported toolchain'), than the CUDA runtime it links or carries linked in statically needs "
        "(35, cudaErrorInsufficientDriver), or than the first driver of the GPU's own generation (a B200 "
        "needs CUDA 12.8's, 570.26: an older driver does not drive it); or archaudit cannot name that "
        "floor (nothing in the library or its package names the CUDA release of its code, an ISA newer "
        "than its tables): fail closed. Where those GPUs run the rest of the "
        "library natively, the floor is that of the kernels they reach only through that PTX, with no "
        "native code there in any container and no evidence that they are not launched there (a kernel "
        "named for another architecture, or one a sourced statement speaks for, sets no floor): the "
        "finding names them and counts them per GPU.",
        "Require the driver named (publish it with the release). The project's own library can instead be "
        "built with an older toolkit (or a lower PTX ISA); a vendor library: nothing to rebuild, its release "
        "needs that driver.",
        "libfoo.so needs driver >= 580.65.06 (CUDA 13.0) on 9.0; 550.54 given. Fix: require driver >= "
        "580.65.06, or build with an older toolkit. 'the provided PTX was compiled with an unsupported "
        "toolchain' from compute_90 (PTX ISA 9.0)",
    ),
    CodeInfo(
        Code.D002,
        INFO,
        "driver floor",
        "The minimum NVIDIA driver for the code the claimed (or --gpu) GPUs would run: per GPU, the "
        "driver of the PTX ISA it JIT-compiles, or its cubin's CUDA major under minor version "
        "compatibility (from the cubin's toolkit note, else the CUDA runtime it links, such as "
        "libcudart.so.12, or carries linked in statically, else another cubin's toolkit note, else the "
        "CUDA major its package is named for, such as -cu12), with the runtime's own floor and the "
        "first driver of the GPU's generation. Without any of these the floor is unknown. With a claim "
        "it is the floor of the claimed GPUs, and where all the code needs more (PTX only a GPU outside "
        "the claim would JIT-compile) it says that floor too; without a claim it is the floor of all the code.",
        "Nothing; publish the floor of the claimed GPUs with the release (the all-code floor only beside "
        "a promise for the GPUs outside the claim that need it).",
        "wheel needs driver >= 580.65.06 on Linux (CUDA 13.0)",
    ),
    CodeInfo(
        Code.X001,
        WARNING,
        "stale ignore entry",
        "An ignore entry in [tool.archaudit] no longer matches any finding.",
        "Delete the entry.",
        "ignore entry G001 for libold.so matches nothing",
    ),
    CodeInfo(
        Code.X002,
        INFO,
        "data member, not judged",
        "A [[tool.archaudit.data]] entry says this wheel member is data that nothing loads as a library "
        "(a wheel shipped for a tool to read, a test fixture), with the publisher's reason; its libraries "
        "are left out of the verdict.",
        "Nothing, while the reason holds; delete the entry when the member becomes code that is loaded.",
        "archaudit/examples/gpu_example-1.0-py3-none-linux_x86_64.whl: data, not judged (the example "
        "wheel `check --example` reads)",
    ),
]

__all__ = ["DRIVERS_CONFIG"]
