import os
import time

from sync_worker import activity


@activity.defn(name="embedjango.work")
def work(seconds: float) -> dict:
    time.sleep(seconds)
    return {"pid": os.getpid()}
