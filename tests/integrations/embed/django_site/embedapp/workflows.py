from sync_worker import workflow


@workflow.defn(name="embedjango.flow")
class Flow:
    def run(self, ctx, seconds):  # type: ignore[no-untyped-def]
        result = yield ctx.schedule_activity("embedjango.work", [seconds], start_to_close_timeout=30)
        return result
