"""A subscription: the images of every publisher session on a channel and stream (Aeron ``Subscription``).

The conductor adds an ``Image`` on ON_AVAILABLE_IMAGE and removes it on ON_UNAVAILABLE_IMAGE, replacing the
``images`` tuple as a whole so a poll never sees a half-updated list. ``poll`` starts at a different image
each time (round robin, as Aeron does) so one busy session cannot starve the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from aeron_numba.client.image import _HEADER_LENGTH, Image, _check_fragment_limit
from aeron_numba.client.local_socket_address_status import channel_status, local_socket_addresses
from aeron_numba.codecs.channel_uri import ENDPOINT_PARAM, ChannelUri
from aeron_numba.kernels.copying_poll import RESULT_NEXT_FRAME
from aeron_numba.layout.counters import CHANNEL_STATUS_ACTIVE

if TYPE_CHECKING:
    from aeron_numba.client.client_conductor import ClientConductor


class Subscription:
    """Created by ``Aeron.add_subscription``; ``close()`` sends REMOVE_SUBSCRIPTION."""

    def __init__(
        self,
        conductor: "ClientConductor",
        channel: str,
        stream_id: int,
        registration_id: int,
        channel_status_id: int,
        available_image_handler: Callable | None,
        unavailable_image_handler: Callable | None,
    ):
        self._conductor = conductor
        self.channel = channel
        self.stream_id = stream_id
        self.registration_id = registration_id
        self.channel_status_id = channel_status_id
        self.available_image_handler = available_image_handler
        self.unavailable_image_handler = unavailable_image_handler
        self._images: tuple[Image, ...] = ()
        self._lone_image: Image | None = None  # the image when there is exactly one (poll's fast path)
        self._round_robin_index = 0
        self._is_closed = False

    # ------------------------------------------------------------------------------------------- polling
    def _ordered_images(self):
        images = self._images
        length = len(images)
        if length == 0:
            return images
        start = self._round_robin_index
        self._round_robin_index = start + 1
        if start >= length:
            start = 0
            self._round_robin_index = 1
        return images[start:] + images[:start]

    def poll(self, handler: Callable, fragment_limit: int) -> int:
        """Poll the images in turn for up to ``fragment_limit`` fragments in total; returns how many.

        ``handler(buffer, offset, length, header)``: see ``Image.poll``. Wrap it in a ``FragmentAssembler``
        to receive whole messages.
        """
        image = self._lone_image
        if image is not None and fragment_limit == image._out_limit:
            # Image.poll written out here (its peek, then Image._poll_found), as Python has no inlining: an idle
            # poll of a one-image subscription is this one call, and one delivering a lone fragment calls only
            # the kernel and the handler (each Python call saved is about 45 ns of a round trip).
            try:
                if image._log_ints[image._result_slots[RESULT_NEXT_FRAME]] == 0:
                    return 0
            except IndexError:  # the image was closed meanwhile
                return 0
            args = image._poll_args
            if args is None:
                return 0
            count = image._poll_and_copy(*args)
            if count == 1:  # the kernel consumed it (and moved the peek's slot); its frame is the copy's first
                handler(args[3], _HEADER_LENGTH, image._rows[1], image._single_header)  # args[3]: the private copy
                return 1
            return image._deliver_batch(handler, args, count)
        images = self._images
        if len(images) == 1:
            return images[0].poll(handler, fragment_limit)
        _check_fragment_limit(fragment_limit)
        fragments_read = 0
        for image in self._ordered_images():
            if fragments_read >= fragment_limit:
                break
            fragments_read += image.poll(handler, fragment_limit - fragments_read)
        return fragments_read

    def controlled_poll(self, handler: Callable, fragment_limit: int) -> int:
        """``poll`` with a handler returning ABORT / BREAK / COMMIT / CONTINUE (see ``Image.controlled_poll``)."""
        images = self._images
        if len(images) == 1:
            return images[0].controlled_poll(handler, fragment_limit)
        _check_fragment_limit(fragment_limit)
        fragments_read = 0
        for image in self._ordered_images():
            if fragments_read >= fragment_limit:
                break
            fragments_read += image.controlled_poll(handler, fragment_limit - fragments_read)
        return fragments_read

    def add_idle_watch(self, watch) -> None:
        """Every image's next frame (``Image.add_idle_watch``); a new image comes with a driver event, which the
        client conductor's ``work_generation`` shows."""
        for image in self._images:
            image.add_idle_watch(watch)

    @property
    def watch_key(self) -> tuple:
        """Another object whenever what ``add_idle_watch`` names may differ (its images, replaced as a whole when one
        comes or goes): an owner keeps what it named while this is the same (``idle_watch.KeptPiece``)."""
        return self._images

    # -------------------------------------------------------------------------------------------- images
    @property
    def images(self) -> list[Image]:
        """The images (one per publisher session) the subscription has now."""
        return list(self._images)

    @property
    def image_count(self) -> int:
        """How many images the subscription has now."""
        return len(self._images)

    def image_by_session_id(self, session_id: int) -> Image | None:
        """The image of the publisher session ``session_id``, or None."""
        for image in self._images:
            if image.session_id == session_id:
                return image
        return None

    def image_at_index(self, index: int) -> Image:
        """The image at ``index`` of ``images``."""
        return self._images[index]

    @property
    def is_connected(self) -> bool:
        """True if at least one image is open."""
        return any(not image.is_closed for image in self._images)

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` ran, or the client closed."""
        return self._is_closed

    # ------------------------------------------------------------------------------ channel endpoint
    @property
    def channel_status(self) -> int:
        """The channel endpoint's status (``layout.counters.CHANNEL_STATUS_*``): ACTIVE for IPC."""
        return channel_status(self._conductor.counters_reader, self.channel_status_id)

    def local_socket_addresses(self) -> list[str]:
        """The ``host:port`` addresses the driver bound for this subscription's channel (none for IPC)."""
        return local_socket_addresses(self._conductor.counters_reader, self.channel_status_id)

    @property
    def resolved_endpoint(self) -> str | None:
        """The first ``host:port`` the driver bound for this subscription (Aeron's ``resolvedEndpoint``), e.g. a
        multi-destination subscription's one destination; None while there is none or it is not ACTIVE."""
        addresses = self.local_socket_addresses()
        return addresses[0] if addresses else None

    def try_resolve_channel_endpoint_port(self) -> str | None:
        """The channel with its ``endpoint``'s wildcard port 0 replaced by the port the driver bound (Aeron's
        ``tryResolveChannelEndpointPort``); the channel as given when it has no wildcard port or the driver shows
        other than one bound address; None while the endpoint is not yet ACTIVE."""
        if self.channel_status != CHANNEL_STATUS_ACTIVE:
            return None
        addresses = self.local_socket_addresses()
        uri = ChannelUri.parse(self.channel)
        endpoint = uri.get(ENDPOINT_PARAM)
        if len(addresses) == 1 and endpoint is not None and endpoint.endswith(":0"):
            return str(uri.replace_endpoint_wildcard_port(addresses[0]))
        return self.channel

    # ---------------------------------------------------------------------------- multi-destination
    def add_destination(self, endpoint_channel: str) -> None:
        """Receive on one more destination (``aeron:udp?endpoint=host:port``) too: its frames feed the same images
        (a session seen through two destinations is one image). The subscription's channel must have
        ``control-mode=manual``. Waits for the driver; raises ``RegistrationError`` with its error code."""
        self._conductor.change_rcv_destination(self, endpoint_channel, add=True)

    def remove_destination(self, endpoint_channel: str) -> None:
        """Stop receiving on a destination added with ``add_destination`` (its socket is closed)."""
        self._conductor.change_rcv_destination(self, endpoint_channel, add=False)

    def async_add_destination(self, endpoint_channel: str) -> int:
        """``add_destination`` without waiting: returns the command's correlation id; a refusal goes to the
        context's error handler (from a duty cycle that must not block, e.g. an archive's)."""
        return self._conductor.change_rcv_destination(self, endpoint_channel, add=True, wait=False)

    def async_remove_destination(self, endpoint_channel: str) -> int:
        """``remove_destination`` without waiting, as ``async_add_destination``."""
        return self._conductor.change_rcv_destination(self, endpoint_channel, add=False, wait=False)

    def close(self) -> None:
        """Send REMOVE_SUBSCRIPTION and close every image (their unavailable handler is called). Idempotent."""
        if not self._is_closed:
            self._conductor.release_subscription(self)

    # ------------------------------------------------------------------ conductor side (under its lock)
    def _has_image(self, correlation_id: int) -> bool:
        return any(image.correlation_id == correlation_id for image in self._images)

    def _set_images(self, images: tuple[Image, ...]) -> None:
        self._images = images
        self._lone_image = images[0] if len(images) == 1 else None

    def _add_image(self, image: Image) -> None:
        self._set_images(self._images + (image,))

    def _remove_image(self, correlation_id: int) -> Image | None:
        for index, image in enumerate(self._images):
            if image.correlation_id == correlation_id:
                self._set_images(self._images[:index] + self._images[index + 1 :])
                return image
        return None

    def _internal_close(self) -> tuple[Image, ...]:
        """Mark closed and hand back the images for the conductor to close and release."""
        self._is_closed = True
        images = self._images
        self._set_images(())
        return images

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Subscription(channel={self.channel!r}, stream_id={self.stream_id},"
            f" registration_id={self.registration_id}, images={len(self._images)}, closed={self._is_closed})"
        )
