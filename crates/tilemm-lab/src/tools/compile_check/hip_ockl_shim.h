// Device-library stand-ins for compiling against ROCm's real HIP headers without ROCm's device
// libraries (hip.amdgcn.bc, ockl): what the headers call for threadIdx, blockIdx, blockDim,
// gridDim and __syncthreads' fences, defined here from clang builtins so that the kernel
// inlines them as it would the real ones instead of calling out (a call would cost registers
// and a scratch stack the real kernel does not have). Used for the sources that include
// rocWMMA, which needs the real headers' types.
#pragma once

extern "C" __device__ __attribute__((const)) inline size_t __ockl_get_local_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workitem_id_x()
       : d == 1 ? __builtin_amdgcn_workitem_id_y()
                : __builtin_amdgcn_workitem_id_z();
}

extern "C" __device__ __attribute__((const)) inline size_t __ockl_get_group_id(uint d) {
  return d == 0 ? __builtin_amdgcn_workgroup_id_x()
       : d == 1 ? __builtin_amdgcn_workgroup_id_y()
                : __builtin_amdgcn_workgroup_id_z();
}

extern "C" __device__ __attribute__((const)) inline size_t __ockl_get_local_size(uint d) {
  return d == 0 ? __builtin_amdgcn_workgroup_size_x()
       : d == 1 ? __builtin_amdgcn_workgroup_size_y()
                : __builtin_amdgcn_workgroup_size_z();
}

extern "C" __device__ __attribute__((const)) inline size_t __ockl_get_num_groups(uint d) {
  return d == 0 ? __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()
       : d == 1 ? __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()
                : __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z();
}

extern "C" __device__ inline void __atomic_work_item_fence(__cl_mem_fence_flags, __memory_order order,
                                                           __memory_scope scope) {
  if (scope == __memory_scope_work_group) {
    if (order == __memory_order_release) __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    else if (order == __memory_order_acquire) __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
    else __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
  } else {
    if (order == __memory_order_release) __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
    else if (order == __memory_order_acquire) __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
    else __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent");
  }
}
