# compile_all.cmake: every configuration of every CUDA op compiled by NVRTC for sm_80 and sm_90a,
# in f32 and bf16 storage, forward and (where the op has one) backward, the loss also with its
# final norm (final_norm=1: the norm's second module), at a Qwen3-8B preset
# (head dim 128, hidden 4096: the real sizes, where registers and shared memory are tightest), so
# no config ships that does not compile. (The emulated variant test builds the same sources at
# tiny shapes.) Needs the CUDA toolkit, not a GPU. Passes with no CUDA ops. Compiled modules are
# cached in FLARETUNE_CACHE_DIR (the build folder's), so a rerun only compiles what changed. The
# SASS instruction mix is left out (--no-sass): nvdisasm's half second per module would double
# the run, and test_compile checks the mix.
#
#   cmake -DFT=path/to/flaretune -P compile_all.cmake
if(NOT FT)
  message(FATAL_ERROR "compile_all: pass -DFT=<path to flaretune>")
endif()

execute_process(COMMAND ${FT} compile --list-ops
                OUTPUT_VARIABLE ops ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compile_all: `flaretune compile --list-ops` failed (${rc}): ${err}")
endif()
string(STRIP "${ops}" ops)
if(ops STREQUAL "")
  message(STATUS "compile_all: no CUDA ops yet: nothing to compile")
  return()
endif()
string(REPLACE "\n" ";" ops "${ops}")

set(failed "")
set(runs 0)
foreach(op ${ops})
  if(op STREQUAL "attention.decode")
    set(qwen qwen3-8b.dflare.decode)
  else()
    set(qwen qwen3-8b.dflare.train)
  endif()
  foreach(arch sm_80 sm_90a)
    foreach(preset ${qwen})
      foreach(variant "dtype=f32" "dtype=bf16" "dtype=f32;backward=1" "dtype=bf16;backward=1"
                      "dtype=f32;final_norm=1" "dtype=bf16;final_norm=1")
        set(args compile ${op} --arch ${arch} --all-configs --no-sass)
        if(NOT preset STREQUAL "default")
          list(APPEND args --preset ${preset})
        endif()
        foreach(a ${variant})
          list(APPEND args --attr ${a})
        endforeach()
        execute_process(COMMAND ${FT} ${args}
                        OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
        # Ops without a backward (or, all but loss, without a final norm) say so as a usage
        # error: nothing to compile there.
        if(rc EQUAL 2 AND err MATCHES "no attribute '(backward|final_norm)'")
          continue()
        endif()
        math(EXPR runs "${runs} + 1")
        string(REPLACE ";" " " shown "${args}")
        string(STRIP "${out}" out)
        string(REGEX REPLACE ".*\n" "" summary "${out}") # the last line: the totals
        if(rc EQUAL 0)
          message(STATUS "ok: flaretune ${shown}: ${summary}")
        else()
          message("FAILED (${rc}): flaretune ${shown}\n${err}")
          list(APPEND failed "${op} ${arch} ${preset} ${variant}")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

list(LENGTH failed nfailed)
if(nfailed GREATER 0)
  string(REPLACE ";" "\n  " failed "${failed}")
  message(FATAL_ERROR "compile_all: ${nfailed} of ${runs} runs failed:\n  ${failed}")
endif()
message(STATUS "compile_all: ${runs} runs, every configuration compiled")
