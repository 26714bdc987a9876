"""Program wait: a program of bounded PyNodes ends by itself; `controller.wait()` returns."""
