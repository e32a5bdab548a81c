"""How the server runs work for many visitors at once: jobs (long work in its own thread), threads (a CPU thread
budget per thread), priority (visitors before trainings), cancel and flights (work that stops or is shared when a
visitor leaves or asks again), budget (one memory budget for the server), hooks (a shared model's hooks per thread),
seeding (seeded results per thread), device (the GPU or CPU a training runs on) and settings (environment variables).
Nothing here knows a lesson or a page."""
