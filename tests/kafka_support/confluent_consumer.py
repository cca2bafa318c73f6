import sys, os, time, json
from confluent_kafka import Consumer
addr, topic, group, name, work = sys.argv[1:6]
c = Consumer({'bootstrap.servers': addr, 'group.id': group, 'client.id': name,
              'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
              'session.timeout.ms': 6000, 'heartbeat.interval.ms': 500})
c.subscribe([topic])
first, count, acked = {}, 0, {}
deadline = time.time() + 150
while not os.path.exists(os.path.join(work, 'stop')) and time.time() < deadline:
    m = c.poll(0.2)
    if m is not None and not m.error():
        first.setdefault(str(m.partition()), m.offset())
        count += 1
        for tp in c.commit(message=m, asynchronous=False):
            if tp.error is None:
                acked[str(tp.partition)] = tp.offset
    state = {'assigned': sorted(tp.partition for tp in c.assignment()), 'first': first,
             'acked': acked, 'count': count}
    with open(os.path.join(work, name + '.tmp'), 'w') as f:
        json.dump(state, f)
    os.replace(os.path.join(work, name + '.tmp'), os.path.join(work, name + '.json'))
c.close()
