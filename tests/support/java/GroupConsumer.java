import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * A Java application's consumer group, as users run them: RocketMQ's own push consumer reads a
 * topic from its first message until it has consumed EXPECTED messages, then shuts down, which
 * persists the group's offsets on the brokers.
 *
 * <p>java -cp ROCKETMQ_JARS/*:CLASSES GroupConsumer NAMESRV TOPIC GROUP EXPECTED TIMEOUT_S
 * prints "CONSUMED n" and exits 0, or exits 1 when fewer arrived within TIMEOUT_S.
 */
public final class GroupConsumer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(args[4]);
        AtomicInteger consumed = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("staticmq-test-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        while (consumed.get() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(500); // the last batches' offsets reach the offset store
        consumer.shutdown(); // persists every queue's offset to its broker
        System.out.println("CONSUMED " + consumed.get());
        System.exit(consumed.get() >= expected ? 0 : 1);
    }
}
