"""The broker's side of the control plane: registering with the controllers and following the
metadata log (metadata_follower), turning each new image into actions on the hosted partitions
(metadata_diff, pure), and answering ControllerService from this broker's own copy of the log so
that `bootstrap.servers` may list brokers (metadata_servicer). A module belongs here when it reads
or relays cluster metadata; what it asks of the partitions is carried out by partition_host.py,
one level up.
"""
