"""The consensus module's side of a leader's compiled ingress in the driver's stretch (``kernels/cluster_ingress``'s
``ingress_stage``): the stage's state filled for one leadership term (its ingress images, the log publication, the
open session table, the cluster's time unit)."""

from __future__ import annotations

from aeron_numba.driver.network_stages import OwnedStage, fill_image_rows
from aeron_numba.kernels import cluster_ingress as ci


class IngressStage(OwnedStage):
    """``stages``: the ``NetworkStages`` of the driver on the module's thread, or None (nothing runs compiled)."""

    def __init__(self, stages=None):
        super().__init__(ci.ingress_stage, ci.new_stage_state(), ci.STAGE_ON, stages)

    def run_for(self, *, leadership_term_id: int, ns_per_unit: int, publication, sessions, images: list,
                key) -> bool:
        """Append the session messages of ``images`` (the ingress images' compiled handles) to ``publication`` (the
        log's exclusive publication) for the sessions of ``sessions`` (the module's ``OpenSessionTable``) in
        ``leadership_term_id``, stamped with the epoch clock in units of ``ns_per_unit``. ``key`` names all of
        that: the same key again only turns the stage back on. False when it cannot run."""
        if self.stages is None or len(images) > ci.MAX_IMAGES:
            self.stop()
            return False
        if self.resume(key):
            return True
        self.stop()
        state = self.state
        state[:] = 0
        log, pub_state, limit, table = (publication.log_buffer, publication.pub_state, publication.limit_buffer,
                                        sessions.table)
        state[ci.STAGE_LEADERSHIP_TERM_ID], state[ci.STAGE_NS_PER_UNIT] = leadership_term_id, ns_per_unit
        state[ci.STAGE_PUB_LOG_ADDRESS], state[ci.STAGE_PUB_LOG_LENGTH] = log.ctypes.data, log.size
        state[ci.STAGE_PUB_STATE_ADDRESS] = pub_state.ctypes.data
        state[ci.STAGE_LIMIT_ADDRESS], state[ci.STAGE_LIMIT_LENGTH] = limit.ctypes.data, limit.size
        state[ci.STAGE_SESSIONS_ADDRESS], state[ci.STAGE_SESSIONS_LENGTH] = table.ctypes.data, table.size
        holds = [log, pub_state, limit, table]
        holds += fill_image_rows(state, ci.STAGE_IMAGES, images)
        state[ci.STAGE_IMAGE_COUNT] = len(images)
        self.start(key, tuple(holds))
        return True
