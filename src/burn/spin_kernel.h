#pragma once
// The kernel `gpumeter burn` runs, as PTX text that the driver compiles when it loads the
// module (cuModuleLoadData), so no CUDA toolkit is needed to build or run it. Every thread
// reads the GPU's nanosecond timer (%globaltimer) and spins until `spin_ns` have passed since it
// started, so a launch keeps the GPU busy for spin_ns of wall time whether or not the driver
// time-slices it with other contexts. PTX ISA 7.0 for sm_70 and newer (Volta onwards); the
// driver JIT-compiles it for the GPU it runs on.

namespace gpumeter::burn {

inline constexpr const char* kSpinEntry = "gpumeter_spin";
inline constexpr unsigned kSpinThreadsPerBlock = 256;

inline constexpr const char* kSpinPtx = R"(//
// gpumeter burn: spin for a given number of nanoseconds.
//
.version 7.0
.target sm_70
.address_size 64

.visible .entry gpumeter_spin(
	.param .u64 gpumeter_spin_ns
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [gpumeter_spin_ns];
	mov.u64 	%rd2, %globaltimer;
	add.s64 	%rd3, %rd2, %rd1;
$L__spin:
	mov.u64 	%rd4, %globaltimer;
	setp.lt.u64 	%p1, %rd4, %rd3;
	@%p1 bra 	$L__spin;
	ret;
}
)";

}  // namespace gpumeter::burn
