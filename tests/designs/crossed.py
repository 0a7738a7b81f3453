"""Designs that break on purpose, for the deadlock tests."""


def crossed_locks(rt, worker, part):
    """Worker 0 takes lock a then b, worker 1 takes b then a: the classic deadlock."""
    a = rt.lock("a", worker.device)
    b = rt.lock("b", worker.device)
    first, second = (a, b) if worker.index == 0 else (b, a)
    yield first.acquire()
    yield rt.sleep(0.1)
    yield second.acquire()
    second.release()
    first.release()
    yield rt.stage("epilogue", part, worker.device)
    part.complete()


def forgets_to_finish(rt, worker, part):
    """Runs the GPU stages but never completes the partition."""
    buffers = yield rt.stage("prestage", part, worker.device)
    yield rt.stage("kernels", part, worker.device, buffers=buffers)
    rt.free(buffers)


def not_a_generator(rt, worker, part):
    return None
