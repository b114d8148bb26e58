"""AMD code judged the way ROCm selects and loads it (archaudit.gpus.rocm), on bundles built by clang 19
and clang-offload-bundler 19 (tests/fixtures/amd/build_loading.sh): a kernel is looked up in its
own bundle only; a code object is judged by its own e_flags where they say more than its bundle
id; the first entry whose id fits is selected, with no fallback; HIP reads hip and hipv4
entries only; --gpu answers for the GPU as it ships."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import amd_reference as ref
from archaudit.cli import main
from archaudit.gpus import rocm
from archaudit.model import CODE_OBJECT, HIP, Container, Entry
from reference_tools import needs_tool

LOADING = Path(__file__).parents[1] / "fixtures" / "amd" / "bin" / "loading"
BIN = LOADING.parent

needs_bundler = needs_tool("clang-offload-bundler", ref.BUNDLER)
needs_readelf = needs_tool("llvm-readelf (one that names AMDGPU processors)", ref.READELF)


def check(tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "r.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), *args])
    text = tmp_path / "r.txt"
    main(["check", "--no-config", "-q", "--detail", "kernels", "-o", str(text), *args])
    return rc, json.loads(out.read_text(encoding="utf-8")), text.read_text(encoding="utf-8")


def findings(doc: dict, code: str) -> list[dict]:
    return [f for t in doc["targets"] for f in t["findings"] if f["code"] == code]


def bundle_ids(path: Path) -> list[str]:
    """The reference bundler's ids of a bare bundle file, or of each bundle of a library's .hip_fatbin."""
    data = path.read_bytes()
    if data[:4] == b"\x7fELF":
        off, size, _ = ref.elf_sections(data)[".hip_fatbin"]
        return [
            " ".join(sorted(ref.reference_bundle(piece, with_entries=False)))
            for _, piece in ref.split_section(data, off, size)
        ]
    listed = subprocess.run(
        [str(ref.BUNDLER), "-list", "-type=o", f"-input={path}"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    return sorted(listed)


# ---- 1. a kernel is looked up in its own bundle ----------------------------------------------------


@needs_bundler
def test_a_kernel_without_code_in_its_own_bundle_fails_k001(tmp_path):
    """Two translation units bundled on their own; fill's (second.hip) was built without gfx942.
    The library as a whole has gfx942 code, but not for fill: it fails on gfx942 (issue 30, 1)."""
    lib = LOADING / "hip_fill_no_gfx942.so"
    per_bundle = bundle_ids(lib)
    assert len(per_bundle) == 2 and any("gfx942" not in b and "gfx90a" in b for b in per_bundle)
    rc, doc, text = check(tmp_path, "--amd-arch", "gfx90a;gfx942", str(lib))
    assert rc == 1
    (k,) = findings(doc, "K001")
    assert k["data"]["kernels"] == ["fill"] and k["data"]["carried"] == ["gfx90a"]
    assert all(g.startswith("gfx942:") for g in k["data"]["fails"]) and len(k["data"]["fails"]) == 4
    assert "own bundle lacks it" in k["message"] and not findings(doc, "G001")
    # --detail kernels: each bundle with its own targets and kernels
    assert "1 hip container in .hip_fatbin: gfx90a  [1 kernel: fill]" in text
    assert "1 hip container in .hip_fatbin: gfx90a gfx942  [3 kernels: saxpy, scale]" in text
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a", str(lib))
    assert rc == 0 and not findings(doc, "K001")


def test_kernel_gaps_need_another_module_that_runs():
    """A setting no module runs on is G001's, not a kernel gap."""
    a = Container(
        "amd",
        HIP,
        ".hip_fatbin",
        0,
        1,
        (
            Entry(
                "amd",
                CODE_OBJECT,
                "gfx90a",
                identifier="hipv4-amdgcn-amd-amdhsa--gfx90a",
                kernels=("a",),
                decoded=True,
                own_target="gfx90a",
            ),
        ),
    )
    b = Container(
        "amd",
        HIP,
        ".hip_fatbin",
        9,
        1,
        (
            Entry(
                "amd",
                CODE_OBJECT,
                "gfx942",
                identifier="hipv4-amdgcn-amd-amdhsa--gfx942",
                kernels=("b",),
                decoded=True,
                own_target="gfx942",
            ),
        ),
    )
    paths = [rocm.path((a, b), g) for g in ("gfx90a:sramecc+:xnack-", "gfx1100")]
    (gap,) = rocm.kernel_gaps((a, b), paths)
    assert (gap.name, gap.carried, gap.fails) == ("b", ("gfx942",), ("gfx90a:sramecc+:xnack-",))


# ---- 2. the code object's own target ---------------------------------------------------------------


@needs_bundler
@needs_readelf
def test_an_id_that_says_less_than_its_code_object_is_judged_as_built(tmp_path):
    """Id gfx90a, code object xnack+ (llvm-readelf): selected for both settings, refused with xnack
    off; so a gfx90a claim fails, a gfx90a:xnack+ claim passes, and G014 says so."""
    fb = LOADING / "id_gfx90a_holds_xnack_on.hipfb"
    assert bundle_ids(fb) == ["hipv4-amdgcn-amd-amdhsa--gfx90a", "host-x86_64-unknown-linux-gnu-"]
    assert ref.readelf_code_object(str(LOADING / "gfx90a_xnack_on.hsaco"))[0] == "gfx90a:xnack+"
    rc, doc, text = check(tmp_path, "--amd-arch", "gfx90a", str(fb))
    assert rc == 1 and findings(doc, "G001")
    assert (
        "the loader refuses its code object (hipv4-amdgcn-amd-amdhsa--gfx90a holds a code object built for "
        "gfx90a:xnack+), with no fallback" in findings(doc, "G001")[0]["message"]
    )
    (g,) = findings(doc, "G014")
    assert g["severity"] == "warning" and g["data"]["built"] == ["gfx90a:xnack+"]
    assert "gfx90a:xnack+(id gfx90a)" in text
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a:xnack+", str(fb))
    assert rc == 0 and findings(doc, "G014")


@needs_bundler
@needs_readelf
def test_sramecc_off_code_is_not_native_on_an_mi300x(tmp_path):
    """Id gfx942, code object sramecc-: an MI300X runs with ECC on (gfx942:sramecc+:xnack-), so
    ROCm selects the entry and the loader refuses it."""
    fb = LOADING / "id_gfx942_holds_sramecc_off.hipfb"
    assert "hipv4-amdgcn-amd-amdhsa--gfx942" in bundle_ids(fb)
    assert ref.readelf_code_object(str(LOADING / "gfx942_sramecc_off.hsaco"))[0] == "gfx942:sramecc-"
    rc, doc, _ = check(tmp_path, "--gpu", "MI300X", str(fb))
    assert rc == 1 and not findings(doc, "G008")
    (g,) = findings(doc, "G009")
    assert g["data"]["setting"] == "gfx942:sramecc+:xnack-" and "as it ships): not at all" in g["message"]
    rc, _, _ = check(tmp_path, "--amd-arch", "gfx942", str(fb))
    assert rc == 1


# ---- 3. selection, kinds, spelling -------------------------------------------------------------------


@needs_bundler
def test_the_first_entry_whose_id_fits_wins_with_no_fallback(tmp_path):
    """Entries in file order: hipv4 gfx90a (an xnack+ object), then hip gfx90a (either setting,
    kernel k). With xnack off the first is selected and refused, and the second is never tried; with
    xnack on the first loads and k, only in the second, cannot be launched."""
    fb = LOADING / "first_fit_wins.hipfb"
    assert bundle_ids(fb) == [
        "hip-amdgcn-amd-amdhsa--gfx90a",
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        "host-x86_64-unknown-linux-gnu-",
    ]
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a:xnack-", str(fb))
    assert rc == 1 and "with no fallback to a later entry" in findings(doc, "G001")[0]["message"]
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a:xnack+", str(fb))
    assert rc == 1 and not findings(doc, "G001")
    (k,) = findings(doc, "K001")
    assert k["data"]["kernels"] == ["k"]


def test_select_walks_entries_in_order_and_skips_what_hip_does_not_read():
    def e(ident: str, target: str, own: str, kernels: tuple[str, ...] = ("k",)) -> Entry:
        return Entry("amd", CODE_OBJECT, target, identifier=ident, kernels=kernels, decoded=True, own_target=own)

    omp = e("openmp-amdgcn-amd-amdhsa--gfx90a", "gfx90a", "gfx90a")
    on = e("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+", "gfx90a:xnack+")
    off = e("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "gfx90a:xnack-", "gfx90a:xnack-")
    c = Container("amd", HIP, ".hip_fatbin", 0, 1, (omp, on, off))
    assert rocm.select(c, "gfx90a:sramecc+:xnack-") == rocm.Selection("native", off)
    assert rocm.select(c, "gfx90a:sramecc+:xnack+") == rocm.Selection("native", on)
    assert rocm.select(c, "gfx942:sramecc+:xnack-") == rocm.NOTHING
    assert not rocm.compatible("gfx11-generic", "gfx1100")  # comgr compares processors as written
    assert rocm.compatible("gfx90a", "gfx90a:sramecc-:xnack+")
    assert not rocm.compatible("gfx90a:sramecc+", "gfx90a:xnack+")  # a GPU setting left open pins nothing


@needs_bundler
def test_an_openmp_entry_is_never_selected_by_hip(tmp_path):
    fb = LOADING / "openmp_entry.hipfb"
    assert "openmp-amdgcn-amd-amdhsa--gfx90a" in bundle_ids(fb)
    rc, doc, text = check(tmp_path, "--amd-arch", "gfx90a", str(fb))
    assert rc == 1
    assert "carries no AMD code HIP selects" in findings(doc, "G001")[0]["message"]
    assert findings(doc, "G015")[0]["data"]["entries"] == ["openmp-amdgcn-amd-amdhsa--gfx90a"]
    assert "(never selected: openmp)" in text


@needs_bundler
def test_an_id_comgr_would_not_match_fails_closed(tmp_path):
    """An upper-case processor in the id: comgr compares it as written, so HIP never selects it."""
    fb = LOADING / "upper_case_id.hipfb"
    assert any("GFX90A" in i for i in bundle_ids(fb))
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a", str(fb))
    assert rc != 0 and (findings(doc, "E030") or findings(doc, "G015"))
    assert not [lib for t in doc["targets"] for lib in t["libraries"] if lib["status"] == "pass"]


# ---- 4. --gpu as the GPU ships ---------------------------------------------------------------------------


def test_mi250x_with_only_xnack_on_code_fails_and_says_what_would_run_it(tmp_path):
    """hip_xnack.so carries gfx90a only as xnack+: an MI250X ships with XNACK off (issue 30, 4)."""
    lib = BIN / "hip_xnack.so"
    rc, doc, _ = check(tmp_path, "--gpu", "MI250X", str(lib))
    assert rc == 1 and not findings(doc, "G008")
    (g,) = findings(doc, "G009")
    assert "gfx90a:sramecc+:xnack-, as it ships" in g["message"] and "HSA_XNACK=1" in g["message"]
    rc, _, _ = check(tmp_path, "--amd-arch", "gfx90a", str(lib))
    assert rc == 1
    rc, doc, _ = check(tmp_path, "--gpu", "gfx90a:sramecc+:xnack+", str(lib))
    assert rc == 0 and findings(doc, "G008")[0]["message"].endswith(": native")


def test_a_gpu_whose_setting_is_not_recorded_must_run_in_every_setting(tmp_path):
    rc, doc, _ = check(tmp_path, "--gpu", "gfx90a", str(BIN / "hip_xnack.so"))
    assert rc == 1 and "is not recorded, so every setting must run" in findings(doc, "G009")[0]["message"]
    rc, doc, _ = check(tmp_path, "--gpu", "gfx90a", str(BIN / "hip_multi.so"))  # gfx90a:xnack- only
    assert rc == 1
    rc, doc, _ = check(tmp_path, "--gpu", "MI250X", str(BIN / "hip_multi.so"))
    assert rc == 0 and findings(doc, "G008")


@pytest.mark.parametrize("name", ["hip_multi.so", "hip_xnack.so", "hip_two_plain.so"])
def test_fixture_entries_keep_their_own_target(name):
    from archaudit.read.artifacts import inventory  # the reader, through the whole pipeline

    inv = inventory(str(BIN / name))
    entries = [e for lib in inv.libraries for e in lib.entries]
    assert entries and all(e.own_target is not None and rocm.judged_target(e) == e.own_target for e in entries)


@needs_bundler
def test_generic_code_is_not_selected_for_a_gpu_and_says_why(tmp_path):
    """hip_ccob_generic.so (CCOB, code object v6) carries gfx11-generic and gfx942: comgr compares an
    entry's processor with the GPU's own, so gfx1100 gets nothing (fail closed, with the reason and
    what would settle it), gfx942 its own entry."""
    lib = BIN / "hip_ccob_generic.so"
    assert "hipv4-amdgcn-amd-amdhsa--gfx11-generic" in " ".join(bundle_ids(lib))
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx1100", str(lib))
    assert rc == 1
    message = findings(doc, "G001")[0]["message"]
    assert "gfx11-generic code is not selected for gfx1100" in message and "archaudit smoke" in message
    rc, _, _ = check(tmp_path, "--amd-arch", "gfx942", str(lib))
    assert rc == 0


def test_a_bare_code_object_before_version_4_is_never_looked_up(tmp_path):
    """hipModuleLoad of an .hsaco goes through comgr's getElfIsaName, which knows code object v4 to
    v6 only. clang 19 no longer writes v3, so the v3 object is clang's v5 one with EI_ABIVERSION
    set to 1 (a v3 header reads the same feature bits as set or clear)."""
    v5 = LOADING / "gfx90a_any_k.hsaco"
    data = bytearray(v5.read_bytes())
    assert data[8] == 3  # EI_ABIVERSION: code object v5
    rc, _, _ = check(tmp_path, "--amd-arch", "gfx90a:xnack+", str(v5))
    assert rc == 0
    data[8] = 1
    v3 = tmp_path / "k_v3.hsaco"
    v3.write_bytes(bytes(data))
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx90a:xnack+", str(v3))
    assert rc == 1
    assert "bare code object of version 3" in findings(doc, "G001")[0]["message"]


@needs_bundler
def test_features_in_either_order_are_the_same_id(tmp_path):
    """comgr's isCompatibleIsaName reads an id's features in any order (CLR's own unbundler, used
    only under HIP_USE_RUNTIME_UNBUNDLER=1, reads sramecc first: docs/amd.md)."""
    fb = LOADING / "features_xnack_first.hipfb"
    assert "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-:sramecc+" in bundle_ids(fb)
    rc, doc, _ = check(tmp_path, "--amd-arch", "gfx942:sramecc+:xnack-", str(fb))
    assert rc == 0 and not findings(doc, "G015")
    rc, _, _ = check(tmp_path, "--amd-arch", "gfx942", str(fb))  # xnack+ and sramecc- settings get nothing
    assert rc == 1


def test_json_detail_kernels_shows_each_entry_as_rocm_judges_it(tmp_path):
    out = tmp_path / "k.json"
    fb = LOADING / "first_fit_wins.hipfb"
    assert (
        main(
            [
                "check",
                "--no-config",
                "-q",
                "--format",
                "json",
                "--detail",
                "kernels",
                "-o",
                str(out),
                "--amd-arch",
                "gfx90a:xnack+",
                str(fb),
            ]
        )
        == 1
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    (c,) = doc["targets"][0]["libraries"][0]["container_list"]
    assert [
        (e["identifier"], e["target"], e["own_target"], e["judged_target"], e["hip_selects"], sorted(e["kernels"]))
        for e in c["entries"]
    ] == [
        (
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "gfx90a",
            "gfx90a:xnack+",
            "gfx90a:xnack+",
            True,
            ["_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "saxpy"],
        ),
        ("hip-amdgcn-amd-amdhsa--gfx90a", "gfx90a", "gfx90a", "gfx90a", True, ["k"]),
    ]


# ---- code objects ROCr's loader refuses on every GPU (no PT_LOAD segment) --------------------------


@needs_readelf
@pytest.mark.parametrize("name", ["relocatable_entry.hipfb", "header_only_entry.hipfb", "gfx90a_k_relocatable.o"])
def test_a_code_object_without_a_loadable_segment_covers_no_gpu(tmp_path, name):
    """ROCr's LoadSegmentsV2 refuses a code object without a PT_LOAD segment (a relocatable object
    never linked, an ELF header alone): HIP selects it first and nothing loads; G018 names it."""
    rc, doc, text = check(tmp_path, str(LOADING / name), "--amd-arch", "gfx90a")
    (g001,) = findings(doc, "G001")
    (g018,) = findings(doc, "G018")
    assert rc == 1 and g001["data"]["carried"] == [] and "without a loadable segment" in g001["message"]
    assert g018["severity"] == "warning"
    if name.endswith(".o"):  # the reference reader: an ET_REL object, no program headers
        out = subprocess.run(
            [str(ref.READELF), "-h", str(LOADING / name)], capture_output=True, text=True, check=True, timeout=60
        ).stdout
        assert "REL (Relocatable file)" in out and "Number of program headers:         0" in out


def test_a_linked_code_object_of_the_same_kernel_covers_its_gpu(tmp_path):
    """The counter-example: the same kernel linked (gfx90a_any_k.hsaco, ET_DYN with PT_LOAD) runs."""
    rc, doc, _ = check(tmp_path, str(LOADING / "gfx90a_any_k.hsaco"), "--amd-arch", "gfx90a")
    assert rc == 0 and not findings(doc, "G018")


# ---- every bundle-id spelling of ROCm 3.5 to 7 (docs/amd.md, "Bundle ids of every ROCm release") ----

SPELLINGS = [  # (file, id as written, selected by today's comgr)
    ("id_clang11_hip.hipfb", "hip-amdgcn-amd-amdhsa-gfx90a", False),  # four fields: parseTargetIdentifier fails
    ("id_hcc.hipfb", "hcc-amdgcn-amd-amdhsa--gfx90a", True),  # kind hcc, comgr reads it
    ("id_hcc_empty_vendor.hipfb", "hcc-amdgcn--amdhsa-gfx90a", False),  # not amdgcn-amd-amdhsa--
    ("id_hip_new_driver.hipfb", "hip-amdgcn-amd-amdhsa--gfx90a", True),  # clang-linker-wrapper
    ("id_hipv4.hipfb", "hipv4-amdgcn-amd-amdhsa--gfx90a", True),  # clang 12 and later
    ("openmp_entry.hipfb", "openmp-amdgcn-amd-amdhsa--gfx90a", False),  # OpenMP: never HIP's
]


def test_the_fixtures_cover_every_sourced_spelling():
    from archaudit.gpus import amd as gfx

    assert sorted(gfx.rocm_rule("bundle-id-spellings")) == sorted(i.rsplit("gfx90a", 1)[0] for _, i, _ in SPELLINGS)


@needs_bundler
@pytest.mark.parametrize("name, ident, selected", SPELLINGS)
def test_every_bundle_id_spelling_is_read_and_judged_as_todays_rocm_selects_it(tmp_path, name, ident, selected):
    """No spelling a HIP runtime of ROCm 3.5 to 7 reads is E030; each is selected or not as comgr's
    lookUpCodeObject does today (G015 names the ones it never selects, with G001 for the claim)."""
    assert ident in bundle_ids(LOADING / name)  # clang-offload-bundler lists the id as written
    rc, doc, _ = check(tmp_path, str(LOADING / name), "--amd-arch", "gfx90a")
    codes = {f["code"] for t in doc["targets"] for f in t["findings"]}
    assert not {c for c in codes if c.startswith("E")}
    from archaudit.read.library import scan_file

    assert ident in [e.identifier for c in scan_file(str(LOADING / name)).containers for e in c.entries]
    if selected:
        assert rc == 0 and "G015" not in codes
    else:
        assert rc == 1 and {"G001", "G015"} <= codes
        assert ident in findings(doc, "G015")[0]["message"]


@pytest.mark.parametrize(
    "ident",
    [
        "cuda-amdgcn-amd-amdhsa--gfx90a",
        "hip-nvptx64-nvidia-cuda--sm_80",
        "hip-amdgcn-amd-amdhsa--",
        "hipv4-amdgcn-amd-amdpal--gfx90a",
    ],
)
def test_an_id_no_rocm_release_reads_is_still_e030(tmp_path, ident):
    import importlib.util

    spec = importlib.util.spec_from_file_location("rebundle", BIN.parent / "rebundle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "x.hipfb"
    mod.main(str(LOADING / "id_hcc.hipfb"), str(out), [ident])
    rc, doc, _ = check(tmp_path, str(out), "--amd-arch", "gfx90a")
    assert rc == 1 and "E030" in {f["code"] for t in doc["targets"] for f in t["findings"]}


# ---- 9. the HIP release a library links picks the lookup -------------------------------------------

RUNTIME = BIN / "runtime"  # tests/fixtures/amd/build_runtime.sh: a bundle of LOADING in .hip_fatbin

# (library, claim, selected): whether the HIP the library links selects its entry for the claim
RELEASES = [
    ("clang11_v4_hip4.so", "gfx90a", True),  # ROCm 4.5 reads a hip entry by its code object (v4)
    ("hipv4_hip4.so", "gfx90a", True),  # and a hipv4 entry by its id
    ("clang11_v4_hip3.so", "gfx90a", True),  # ROCm 3.10: the processor after hip-amdgcn-amd-amdhsa-
    ("clang11_v4_hip5.so", "gfx90a", False),  # ROCm 5.7 (comgr): four fields never
    ("clang11_v4_none.so", "gfx90a", False),  # links no HIP: today's rule
    ("clang11_v5_hip4.so", "gfx90a", False),  # ROCm 4.5 reads code object v3 and v4 only
    ("features_xnack_first_hip4.so", "gfx942", False),  # ROCm 4.5 parses sramecc before xnack
]


def _needed(path: Path) -> list[str]:
    """DT_NEEDED as binutils' readelf lists it (the reference, not archaudit's reader)."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


@pytest.mark.parametrize("name, claim, selected", RELEASES)
def test_the_hip_a_library_links_picks_which_bundle_ids_are_selected(tmp_path, name, claim, selected):
    """A four-field id (clang 11) is selected where the library links the HIP of ROCm 3 or 4
    (libamdhip64.so.3, .so.4), never where it links ROCm 5 or later's or none (today's comgr)."""
    path = RUNTIME / name
    from archaudit.read.library import scan_file

    lib = scan_file(str(path))
    assert list(lib.needed) == _needed(path)
    rc, doc, _ = check(tmp_path, str(path), "--amd-arch", claim)
    codes = {f["code"] for t in doc["targets"] for f in t["findings"]}
    if selected:
        assert rc == 0 and not codes & {"G001", "G015"}
        return
    assert rc == 1 and {"G001", "G015"} <= codes
    message = findings(doc, "G015")[0]["message"]
    runtime = rocm.lookup_for(lib.needed)
    assert ("comgr reads only" in message) == runtime.today
    if not runtime.today:  # says which HIP judged it, and what that HIP reads
        assert f"the HIP of ROCm {runtime.judged_as} ({runtime.runtime}" in message
        assert runtime.runtime in findings(doc, "G001")[0]["message"]


def test_rocm_3_selects_nothing_where_two_entries_fit():
    """ROCm 3.5 to 4.0 count every fitting entry (hip-amdgcn-amd-amdhsa-gfx90a and
    hcc-amdgcn-amd-amdhsa--gfx90a both name gfx90a there): more than one is hipErrorNoBinaryForGpu.
    Today's comgr reads the hcc entry only, and selects it."""
    from archaudit.read.library import scan_file

    lib = scan_file(str(RUNTIME / "clang11_and_hcc_hip3.so"))
    (bundle,) = lib.containers
    assert [rocm.read_target(e, rocm.lookup_for(lib.needed)) for e in bundle.entries[-2:]] == ["gfx90a", "gfx90a"]
    for gpu in rocm.settings("gfx90a"):
        assert rocm.select(bundle, gpu, rocm.lookup_for(lib.needed)) == rocm.NOTHING
        assert rocm.select(bundle, gpu).entry is bundle.entries[-1]


def test_each_hip_soname_names_a_lookup_with_a_source():
    """Every libamdhip64 SONAME row names a lookup; ROCm 5 and later are judged by today's rule,
    so a library linking them never passes more than comgr selects."""
    from archaudit.gpus import amd as gfx

    rows = gfx.hip_runtimes()
    assert sorted(rows) == [f"libamdhip64.so.{n}" for n in range(3, 8)]
    for soname in rows:
        lookup = rocm.lookup_for([soname])
        assert lookup.runtime == soname and gfx.hip_lookup(lookup.name)["source"]
        assert lookup.today == (int(soname.rsplit(".", 1)[1]) >= 5)
    assert rocm.lookup_for(["libamdhip64.so", "libc.so.6"]) == rocm.TODAY


# ---- 10. the ROCm release a package is named for -------------------------------------------------

CUPY_ROCM_4_0 = "cupy_rocm_4_0-10.6.0-cp39-cp39-manylinux1_x86_64.whl"
CUPY_CLAIM = "gfx801,gfx802,gfx803,gfx900,gfx906,gfx908,gfx1010,gfx1011,gfx1012"  # census cupy-rocm-4-0


def test_a_package_names_its_rocm_release_as_cupy_documents():
    """CuPy's cupy-rocm-X-Y is the wheel for ROCm X.Y (data/amd.json package_names, with its source)."""
    from archaudit.gpus import amd as gfx

    assert [gfx.package_rocm(n) for n in ("cupy-rocm-4-0", "cupy_rocm_4_2", "CuPy-ROCm-5-0")] == ["4.0", "4.2", "5.0"]
    assert [gfx.package_rocm(n) for n in ("cupy", "cupy-cuda12x", "cupy-rocm", "")] == [None] * 4
    for row in gfx.hip_releases().values():
        assert row["runtime"] in gfx.hip_runtimes() and gfx.hip_loading(row["loading"])["source"]


def _as_wheel(tmp_path: Path, library: Path, wheel: str) -> Path:
    """``library`` as the one member of a wheel of that file name (the name says the package)."""
    import zipfile

    out = tmp_path / wheel
    name, version = wheel.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(out, "w") as z:
        z.write(library, f"pkg/{library.name}")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-manylinux1_x86_64\n")
        z.writestr(f"{info}/RECORD", "")
    return out


def test_rocm_4_0_selects_by_processor_and_its_loader_refuses_what_it_does_not_know(tmp_path):
    """A package named for ROCm 4.0 whose library links libamdhip64.so.4 is judged as ROCm 4.0:
    the processor after hip-amdgcn-amd-amdhsa- selects the gfx90a entry, and ROCr 4.0's loader
    refuses it (code object v4, and gfx90a is no ISA it lists): fail closed. The same library in a
    package that names no release is judged as ROCm 4.5 (.so.4's newest), which runs it."""
    lib = RUNTIME / "clang11_v4_hip4.so"
    named = _as_wheel(tmp_path, lib, "cupy_rocm_4_0-1.0-py3-none-manylinux1_x86_64.whl")
    rc, doc, _ = check(tmp_path, str(named), "--amd-arch", "gfx90a")
    assert rc == 1 and not findings(doc, "G015")
    (g001,) = findings(doc, "G001")
    assert (
        "the loader refuses its code object" in g001["message"]
        and "ROCm 4.0, the release its package" in g001["message"]
    )
    unnamed = _as_wheel(tmp_path, lib, "other-1.0-py3-none-manylinux1_x86_64.whl")
    rc, doc, _ = check(tmp_path, str(unnamed), "--amd-arch", "gfx90a")
    assert rc == 0 and not findings(doc, "G001")


def test_a_release_of_another_hip_major_keeps_the_sonames_rule(tmp_path):
    """A package naming ROCm 4.0 whose library links libamdhip64.so.5 contradicts itself: the
    SONAME's rule (comgr) stays and the four-field id is G015, saying what the package named."""
    lib = RUNTIME / "clang11_v4_hip5.so"
    named = _as_wheel(tmp_path, lib, "cupy_rocm_4_0-1.0-py3-none-manylinux1_x86_64.whl")
    rc, doc, _ = check(tmp_path, str(named), "--amd-arch", "gfx90a")
    assert rc == 1 and findings(doc, "G015")
    assert rocm.lookup_for(["libamdhip64.so.5"], "4.0").name == "comgr"
    assert (
        "libamdhip64.so.5; its package names ROCm 4.0, which ships another HIP" in findings(doc, "G001")[0]["message"]
    )


@pytest.fixture(scope="module")
def cupy_rocm_4_0() -> Path:
    from wheels import fetch

    return fetch("cupy-rocm-4-0", "10.6.0", "manylinux1_x86_64", filename=CUPY_ROCM_4_0)


def _missing(doc: dict) -> dict[str, set[str]]:
    """Per library with a G001: the claimed processors it names as missing."""
    out: dict[str, set[str]] = {}
    for f in findings(doc, "G001"):
        head = f["message"].split(" has no code for ", 1)[1].split(" (claimed)", 1)[0]
        out[f["subject"].rsplit("/", 1)[-1]] = set(head.split(", "))
    return out


def test_cupy_rocm_4_0_is_judged_as_rocm_4_0_where_its_name_says_so(tmp_path, cupy_rocm_4_0):
    """The real wheel: its v3 code objects state one xnack/sramecc setting each (gfx906 e_flags
    0x2F: no sram-ecc). ROCm 4.0 selects by processor and its loader never compares xnack, so every
    claimed processor runs but gfx906 with SRAM ECC on (an MI50), where ROCr 4.0 refuses code
    built without sram-ecc. Named for no release, .so.4's newest (4.5) misses seven processors."""
    rc, doc, _ = check(tmp_path, str(cupy_rocm_4_0), "--amd-arch", CUPY_CLAIM)
    assert rc == 1 and list(_missing(doc).values()) == [{"gfx906"}, {"gfx906"}]
    assert not findings(doc, "G015")
    for f in findings(doc, "G001"):
        assert "on gfx906:sramecc+:xnack+, gfx906:sramecc+:xnack- ROCm selects" in f["message"]
    rc, doc, _ = check(tmp_path, str(cupy_rocm_4_0), "--amd-arch", CUPY_CLAIM.replace("gfx906", "gfx906:sramecc-"))
    assert rc == 0 and not findings(doc, "G001")
    other = tmp_path / CUPY_ROCM_4_0.replace("cupy_rocm_4_0", "unnamed")
    other.symlink_to(cupy_rocm_4_0)
    rc, doc, _ = check(tmp_path, str(other), "--amd-arch", CUPY_CLAIM)
    want = {"gfx801", "gfx900", "gfx906", "gfx908", "gfx1010", "gfx1011", "gfx1012"}
    assert rc == 1 and all(m == want for m in _missing(doc).values()) and len(_missing(doc)) == 2
