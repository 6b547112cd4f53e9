"""Aeron client: Aeron, Context, Publication, Subscription, Image, counters and the cnc.dat mapping."""
