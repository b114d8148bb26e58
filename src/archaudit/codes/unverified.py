"""The E codes: what could not be verified (always fails closed), each code's CodeInfo."""

from __future__ import annotations

from . import ERROR, Code, CodeInfo

UNVERIFIED: list[CodeInfo] = [
    CodeInfo(
        Code.E001,
        ERROR,
        "target unreadable",
        "The file, directory or distribution could not be opened or read.",
        "Check the path and permissions; for a distribution name, that it is installed.",
        "dist/x.whl: cannot read: [Errno 2] No such file or directory",
    ),
    CodeInfo(
        Code.E002,
        ERROR,
        "malformed archive",
        "The wheel is not a valid zip archive: truncated, bad central directory, a member "
        "whose data does not match its header or CRC; or the places a zip records its members "
        "(end record, zip64 records, central directory, local headers) disagree, so the members "
        "read might not be the ones pip installs.",
        "Rebuild or re-download the wheel; a truncated upload is the usual cause.",
        "x.whl: malformed archive: central directory not found (truncated?)",
    ),
    CodeInfo(
        Code.E003,
        ERROR,
        "archive hazard",
        "A member is a zip bomb (absurd declared or actual size or ratio, data shared with another "
        "member, more inflated bytes than the wheel's size can justify, more libraries than any real "
        "wheel), is listed twice, has an absolute or '..' path, or is a symlink/special file where a "
        "library was expected.",
        "Rebuild the wheel with a standard tool (pip wheel, build); never ship such members.",
        "x.whl: torch/lib/libx.so: member listed twice",
    ),
    CodeInfo(
        Code.E004,
        ERROR,
        "not a wheel",
        "The target is not what its name or its place says: a .whl zip with no (or more than one) "
        "top-level .dist-info directory, which pip refuses to install; or a file given by name that "
        "is neither a wheel nor a library nor device code (a plain zip, an sdist .tar.gz, text).",
        "Audit the built wheel (python -m build --wheel, pip wheel) or the library itself.",
        "x-1.0-py3-none-any.whl: not a wheel: .dist-info directory not found (pip refuses it)",
    ),
    CodeInfo(
        Code.E010,
        ERROR,
        "malformed ELF",
        "A library is not a well-formed ELF file (bad header, section table outside the file, non-ELF file named .so).",
        "The project's own library: check the build; a text or linker-script file named .so is not loadable. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a release that reads.",
        "lib/libfoo.so: malformed ELF: not an ELF file",
    ),
    CodeInfo(
        Code.E011,
        ERROR,
        "malformed fatbin",
        "A CUDA fatbin container or entry is inconsistent: sizes overrun the container or file, "
        "a bad header, an entry chain that does not end where the container does.",
        "The project's own library: rebuild it. A vendor library: nothing to rebuild; report it to its vendor "
        "with the file and the container named.",
        "libfoo.so: fatbin container at 0x4a0: entry overruns its container (.nv_fatbin[1]). Fix: rebuild "
        "it if it is the project's own, else report it to its vendor",
    ),
    CodeInfo(
        Code.E012,
        ERROR,
        "undecodable payload",
        "A compressed device-code payload does not decode to its declared size, or is too large "
        "to verify within archaudit's memory bound.",
        "The project's own library: rebuild it; a payload that does not decode will not load on the GPU either. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a release that reads.",
        "libfoo.so: sm_90 entry at 0x1c40: zstd payload decodes to 812 bytes, header says 1024",
    ),
    CodeInfo(
        Code.E013,
        ERROR,
        "unknown entry kind",
        "A fatbin entry has a kind archaudit does not know, so its target cannot be verified.",
        "Report it to archaudit with the library; until then it cannot be verified. The project's own library: "
        "rebuild it with a released toolkit. A vendor library: nothing to rebuild; report it to archaudit.",
        "libfoo.so: entry kind 16 at 0x2000 is unknown",
    ),
    CodeInfo(
        Code.E014,
        ERROR,
        "malformed device code",
        "A cubin, PTX or code object inside a container (or as a file) is not what its header "
        "says: not an ELF for the GPU, architecture disagreeing with the header, no .target.",
        "The project's own library or file: rebuild it. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "kern.cubin: not a CUDA ELF (e_machine 62)",
    ),
    CodeInfo(
        Code.E015,
        ERROR,
        "payloads not verified (--fast)",
        "--fast read entry headers only: the library's compressed payloads were not decoded, so "
        "its kernel names, the cubins' own target flags, each PTX text's .target and the "
        "payloads' integrity are unchecked. A verdict that rests on them cannot pass.",
        "Run without --fast: every payload is decoded in the same single pass.",
        "lib/libk.so: 12 of 14 device-code entries not decoded (--fast): kernels, cubin flags and "
        "PTX .target unverified",
    ),
    CodeInfo(
        Code.E020,
        ERROR,
        "unsupported library format",
        "The library is a format archaudit does not read: a big-endian ELF, or a 32-bit ELF that carries "
        "device code (its headers are not read, so what it loads cannot be placed). Its device code cannot "
        "be verified.",
        "Only 64-bit little-endian ELF, PE32 and PE32+ (Windows) and Mach-O (macOS) libraries are audited.",
        "lib32/libfoo.so: unsupported library format: a 32-bit ELF carrying device code (1 container(s))",
    ),
    CodeInfo(
        Code.E021,
        ERROR,
        "malformed PE",
        "A Windows library (.dll/.pyd) is not a well-formed PE image: no PE signature (an MS-DOS "
        "program), headers or section table outside the file, a section's data past the end, an "
        "import directory or long section name that points nowhere. Its device code cannot be "
        "located, so it is unverified.",
        "The project's own library: rebuild it; a truncated download or a file that is not a DLL renamed .pyd "
        "is the usual cause. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "pkg/_ext.pyd: malformed PE: section 3 (.nv_fatb) lies outside the file",
    ),
    CodeInfo(
        Code.E030,
        ERROR,
        "malformed HIP bundle",
        "A clang offload bundle (HIP device code) has an impossible header or entry table.",
        "The project's own library: rebuild it with a supported ROCm toolchain. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: malformed HIP bundle at 0x1000: entry overruns the bundle",
    ),
    CodeInfo(
        Code.E031,
        ERROR,
        "undecodable HIP payload",
        "A compressed offload bundle (CCOB) does not decode to its declared size.",
        "The project's own library: rebuild it; the HIP runtime will not load it either. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: CCOB at 0x1000 decodes to 10 bytes, header says 400",
    ),
    CodeInfo(
        Code.E032,
        ERROR,
        "HIP payload too large to verify",
        "A compressed offload bundle declares more bytes than archaudit verifies in memory.",
        "Raise --max-payload if the size is genuine.",
        "libhip.so: CCOB at 0x1000 declares 4 GiB",
    ),
    CodeInfo(
        Code.E033,
        ERROR,
        "HIP bundle outside its section",
        "A valid clang offload bundle (HIP device code, plain or compressed) lies in none of the "
        "sections of a library that has a section table, or runs past the end of the section it "
        "starts in. Every byte a linker places is in a section, so the bundle was written there after "
        "the link (appended, in header slack or padding), where the HIP runtime's registration and "
        "every tool that reads sections miss it.",
        "The project's own library: rebuild it so its device code is linked in (.hip_fatbin); do not append "
        "device code to a built library. "
        "A vendor library: nothing to rebuild; report it to its vendor with the file, and use a "
        "release that reads.",
        "libhip.so: HIP bundle at 0x9000 lies in no section",
    ),
    CodeInfo(
        Code.E099,
        ERROR,
        "internal error",
        "archaudit met input it did not expect and could not verify the library. The check "
        "fails closed rather than passing it.",
        "Report it to archaudit with the file; the library stays unverified until then.",
        "libfoo.so: could not be verified: internal error ValueError: ...",
    ),
]

__all__ = ["UNVERIFIED"]
