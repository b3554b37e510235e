"""What consumers ask and are answered: pull statuses, pop ack outcomes and popped messages'
properties, tag expressions and their filters."""
