"""Build macros: protobuf/gRPC code generation with the system protoc, and nvcc for .cu files.

Both run tools from Debian's packages or the CUDA toolkit, so the build needs no download.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def shardps_proto_library(name, src, deps = [], grpc = True, visibility = None):
    """Generates C++ (and gRPC) code for one .proto and wraps it in a cc_library.

    Args:
      name: the cc_library's name.
      src: the .proto file, in this package.
      deps: other shardps_proto_library targets this proto imports.
      grpc: whether to run grpc_cpp_plugin too (for files that declare services).
      visibility: the cc_library's visibility.
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    prefix = pkg + "/" + base if pkg else base
    outs = [base + ".pb.h", base + ".pb.cc"]
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    cmd = "protoc -I. --cpp_out=$(GENDIR) "
    if grpc:
        cmd += "--plugin=protoc-gen-grpc=$$(which grpc_cpp_plugin) --grpc_out=$(GENDIR) "
    cmd += prefix + ".proto"
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = cmd,
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = [src] + [d + "_srcs" for d in deps],
        visibility = visibility,
    )
    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + (["@system//:grpc"] if grpc else ["@system//:protobuf"]),
        visibility = visibility,
    )

def cuda_library(name, srcs, hdrs = [], deps = [], cuda_deps = [], visibility = None, copts = []):
    """Compiles .cu files with nvcc into a static library linked with cudart and cuBLAS.

    Targets sm_90 (H100/H200) with PTX for later GPUs; CUDA 13 has nothing below sm_75.

    Args:
      name: the cc_library's name.
      srcs: the .cu files.
      hdrs: headers the .cu files and the library's users include.
      deps: cc_library targets the library links.
      cuda_deps: other cuda_library targets whose headers the .cu files include; linked too.
      visibility: the library's (and its headers') visibility.
      copts: extra nvcc options.
    """
    native.filegroup(
        name = name + "_hdrs",
        srcs = hdrs + [d + "_hdrs" for d in cuda_deps],
        visibility = visibility,
    )
    objs = []
    for src in srcs:
        obj = src[:-len(".cu")] + ".cu.o"
        pkg = native.package_name()
        path = pkg + "/" + src if pkg else src
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src, ":" + name + "_hdrs"],
            outs = [obj],
            cmd = ("/usr/local/cuda/bin/nvcc -std=c++17 -O3 -Xcompiler -fPIC -I. -I$(GENDIR) " +
                   "-gencode arch=compute_90,code=[sm_90,compute_90] " + " ".join(copts) +
                   " -c " + path + " -o $@"),
        )
        objs.append(obj)
    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + cuda_deps + ["@cuda//:cudart_cublas"],
        visibility = visibility,
        alwayslink = True,
    )

def vectorize_copts():
    """gcc's cost model for loops of unknown trip count; clang's vectorizer needs no flag."""
    return select({
        "//tools:clang": [],
        "//conditions:default": ["-fvect-cost-model=dynamic"],
    })
