# Sourced by the GPU machine's scripts (bench/vulkan_h200_device.sh, bench/vulkan_h200_taps.sh),
# from the repository root, with .h200/ and .gl/ prepared here by bench/vulkan_h200.sh. Sets
# H, W and CKPT, and the environment every program started there needs.
H=.h200
W=/tmp/vlmc-h200
CKPT=$W/ckpt-3b
mkdir -p "$W"
# Keep NVLink multicast off, as the machine's rules ask, for every program started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
# The artifacts travel xz'd (bench/vulkan_h200.sh): unpacked next to themselves, once.
for z in "$H"/*.vlmc.xz; do
  [ -e "$z" ] || continue
  [ -e "${z%.xz}" ] || xz -dk "$z"
done

# h200_checkpoint: $CKPT rewritten from the skeleton (bench/random_checkpoint.py, seed 1: the
# bytes the artifacts were compiled against). A warm machine keeps /tmp: the checkpoint of an
# earlier run of the same skeleton is reused. Its progress goes to stderr.
h200_checkpoint() {
  if cmp -s "$H/skel-3b.json" "$CKPT.skeleton" 2>/dev/null; then
    echo "reusing $CKPT (written from the same skeleton)"
    return 0
  fi
  rm -f "$CKPT.skeleton"
  python3 bench/random_checkpoint.py write "$H/skel-3b.json" "$CKPT" --seed 1 || return 1
  cp "$H/skel-3b.json" "$CKPT.skeleton"
}

# h200_vulkan: the Vulkan loader for vlmc-run. The machine has NVIDIA's driver but no loader
# and no GLVND libraries, which the driver's ICD library needs: .gl/ holds Debian's, unpacked
# into / as the device notes say. Exports LD_LIBRARY_PATH (vlmc-run's libraries in $H/lib) and
# VK_DRIVER_FILES (the NVIDIA ICD file, where none is set), and prints which ICD it chose and
# what its library lacks.
h200_vulkan() {
  if [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  export LD_LIBRARY_PATH=$PWD/$H/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -z "${VK_DRIVER_FILES:-}" ]; then
    local icd
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
               /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
               $(find / -xdev -name 'nvidia_icd*.json' 2>/dev/null | head -3); do
      if [ -e "$icd" ]; then export VK_DRIVER_FILES=$icd; break; fi
    done
  fi
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-none found}"
  [ -n "${VK_DRIVER_FILES:-}" ] || return 0
  cat "$VK_DRIVER_FILES"; echo
  local lib path
  lib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ICD"]["library_path"])' \
    "$VK_DRIVER_FILES" 2>/dev/null)
  [ -n "$lib" ] || return 0
  case $lib in
    /*) path=$lib ;;
    *) path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }') ;;
  esac
  echo "ICD library $lib -> ${path:-not in ldconfig}"
  [ -z "$path" ] || ldd "$path" | grep -i "not found" || true
}
