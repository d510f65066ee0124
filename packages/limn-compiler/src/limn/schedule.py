"""The scheduler by its public name: `from limn.schedule import schedule, describe` cuts an op graph into fused
kernels and prints them (limn.compiler.schedule does the work; this module only names it where users reach)."""

from limn.compiler.schedule import Kernel, Schedule, ScheduleError, describe, kernel_count, schedule

__all__ = ["Kernel", "Schedule", "ScheduleError", "describe", "kernel_count", "schedule"]
