// The Mach declarations backend/metal/metal_device.mm uses (kern_return_t,
// KERN_SUCCESS, mach_port_t), from Apple's documentation, for the
// compile-only check on machines without macOS (../../check_host_compile.sh).
#pragma once
typedef int kern_return_t;
typedef unsigned int mach_port_t;
#define KERN_SUCCESS 0
